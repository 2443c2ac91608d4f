// Argmax on CUDA: out[r] = the index of row r's largest value, the CPU's
// answer (the first largest value, NaNs never taken; a row whose element 0
// is NaN answers 0).
//
// Design
// - A row is read by `splits` blocks of 256 threads, or 1024 when there are
//   so few rows that each can have kArgmaxMaxSplits of those within one
//   wave (a thread block cluster when splits > 1). Every thread walks the row's 16-byte
//   aligned body in vectors, kArgmaxUnroll loads in flight, at a stride of
//   all the row's threads; the few elements before the first 16-byte
//   boundary and after the last whole vector are read one by one. So any
//   row length and any element-aligned start take the vector path.
// - Two-level reduction: warp shuffles, then the block's warps through
//   shared memory; the cluster's rank 0 merges its blocks' results through
//   distributed shared memory. One kernel, no global scratch, no counters:
//   graph- and stream-safe.
// - Ordering: every partial starts from (row[0], 0), and (v, i) replaces
//   (bv, bi) only when v > bv or v == bv and i < bi. When row[0] is not NaN
//   that is a total order over the states a partial can reach (NaN never
//   enters), so the result is the CPU's in any reduction order; when row[0]
//   is NaN nothing replaces it and the answer is 0, as on the CPU.
// - splits (ArgmaxSplits) doubles from 1 while the grid still fits in one
//   wave of resident blocks and every thread keeps at least
//   kArgmaxMinVectorsPerThread vectors (one with 1024-thread blocks, where
//   the few rows make latency the cost): a decode batch of 256 x 32000 runs
//   4 blocks of 256 per row in f32 (2 in bf16), one row of 32000 f32 4
//   blocks of 1024, one vocabulary-wide row kArgmaxMaxSplits (the portable
//   cluster size) blocks of 1024.
#include <cooperative_groups.h>

#include <cstdint>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kArgmaxUnroll = 4;     // 16-byte loads in flight per thread
constexpr int kArgmaxMaxSplits = 8;  // blocks per row at most: the portable cluster size
constexpr int kArgmaxMinVectorsPerThread = kArgmaxUnroll;  // many rows: keep each thread's loads batched
constexpr int kArgmaxFewRowsMinVectors = 1;                 // few rows (1024 threads): latency, spread wide
constexpr int kThreadsPerSm = 2048;  // resident threads per SM (sm_90)

// True when (v, i) comes before (bv, bi): larger value, or equal and lower index.
__device__ __forceinline__ bool Before(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

__device__ __forceinline__ void Take(float v, int i, float& bv, int& bi) {
  if (Before(v, i, bv, bi)) bv = v, bi = i;
}

// Block-wide merge of every thread's (bv, bi); thread 0 ends with the block's best.
template <int kThreads>
__device__ __forceinline__ void BlockMerge(float& bv, int& bi) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float s_val[kWarps];
  __shared__ int s_idx[kWarps];
  for (int o = 16; o > 0; o >>= 1) Take(__shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o), bv, bi);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) s_val[warp] = bv, s_idx[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) Take(s_val[w], s_idx[w], bv, bi);
  }
}

// Block `blockIdx.x` reads split blockIdx.x % splits of row blockIdx.x / splits.
// kCluster: the `splits` blocks of a row form a cluster (launched with its dimension).
template <typename T, bool kCluster, int kThreads>
__global__ void __launch_bounds__(kThreads)
    ArgmaxKernel(const T* __restrict__ x, int32_t* __restrict__ out, int64_t n, int splits) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  using VecT = Vec<T, V>;
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t row = blockIdx.x / splits;
  const int rank = static_cast<int>(blockIdx.x % splits);
  const T* in = x + row * n;
  float bv = ToFloat(in[0]);
  int bi = 0;
  // head: elements before the first 16-byte boundary (the start is element-aligned).
  const int misalign = static_cast<int>(reinterpret_cast<uintptr_t>(in) % 16);
  int64_t head = misalign == 0 ? 0 : (16 - misalign) / static_cast<int>(sizeof(T));
  if (head > n) head = n;
  const int64_t nv = (n - head) / V;
  const int64_t tail = head + nv * V;
  const int64_t tid = static_cast<int64_t>(rank) * kThreads + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(splits) * kThreads;
  // Head and tail hold fewer than V elements each: the first threads of the row take them.
  if (tid < head) Take(ToFloat(in[tid]), static_cast<int>(tid), bv, bi);
  const VecT* body = reinterpret_cast<const VecT*>(in + head);
  auto consume = [&](const VecT& vec, int64_t i) {
    const int first = static_cast<int>(head + i * V);
#pragma unroll
    for (int j = 0; j < V; ++j) Take(ToFloat(vec.v[j]), first + j, bv, bi);
  };
  int64_t i = tid;
  for (; i + (kArgmaxUnroll - 1) * stride < nv; i += kArgmaxUnroll * stride) {
    VecT vecs[kArgmaxUnroll];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) vecs[u] = body[i + u * stride];
#pragma unroll
    for (int u = 0; u < kArgmaxUnroll; ++u) consume(vecs[u], i + u * stride);
  }
  for (; i < nv; i += stride) consume(body[i], i);
  if (tail + tid < n) Take(ToFloat(in[tail + tid]), static_cast<int>(tail + tid), bv, bi);

  BlockMerge<kThreads>(bv, bi);
  if constexpr (kCluster) {
    namespace cg = cooperative_groups;
    __shared__ float c_val;  // this block's best, read by rank 0
    __shared__ int c_idx;
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) c_val = bv, c_idx = bi;
    cluster.sync();  // every block's (c_val, c_idx) is final
    if (rank == 0 && threadIdx.x == 0) {
      for (int r = 1; r < splits; ++r) Take(*cluster.map_shared_rank(&c_val, r), *cluster.map_shared_rank(&c_idx, r), bv, bi);
      out[row] = bi;
    }
    cluster.sync();  // rank 0 is done reading the others' shared memory
  } else {
    if (threadIdx.x == 0) out[row] = bi;
  }
}

// Threads per block: 1024 when every row can have kArgmaxMaxSplits such
// blocks within one wave (a handful of rows), else 256.
int ArgmaxThreads(int64_t rows, int sms) {
  return rows * kArgmaxMaxSplits * 1024 <= int64_t{sms} * kThreadsPerSm ? 1024 : 256;
}

// Blocks per row; see the header.
int ArgmaxSplits(int64_t rows, int64_t n, int vec, int sms, int threads) {
  const int64_t resident = int64_t{sms} * (kThreadsPerSm / threads);
  const int64_t vectors = n / vec;
  const int min_vectors = threads == 1024 ? kArgmaxFewRowsMinVectors : kArgmaxMinVectorsPerThread;
  int splits = 1;
  while (splits < kArgmaxMaxSplits && rows * splits * 2 <= resident &&
         vectors >= int64_t{splits} * 2 * threads * min_vectors) {
    splits *= 2;
  }
  return splits;
}

template <typename T, int kThreads>
absl::Status LaunchArgmax(const T* x, int32_t* o, int64_t rows, int64_t n, int splits, cudaStream_t stream) {
  const unsigned int blocks = static_cast<unsigned int>(rows * splits);
  if (splits == 1) {
    return LaunchEnrolled({dim3(blocks), dim3(kThreads), 0, stream}, ArgmaxKernel<T, false, kThreads>, x, o, n, 1);
  }
  return LaunchEnrolled({dim3(blocks), dim3(kThreads), 0, stream, dim3(static_cast<unsigned int>(splits), 1, 1)},
                        ArgmaxKernel<T, true, kThreads>, x, o, n, splits);
}

absl::StatusOr<int> SmCount() {
  int device = 0, sms = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

absl::Status Argmax(const Tensor& logits, const Tensor& out) {
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  if (rows == 0) return absl::OkStatus();
  if (rows > 0x7fffffff / kArgmaxMaxSplits || n >= 0x7fffffff) {
    return absl::UnimplementedError(absl::StrCat("Argmax: CUDA kernel takes fewer than 2^28 rows and 2^31 columns, got ",
                                                 ShapeToString(logits.shape())));
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(logits, "Argmax"));
  SEAM_ASSIGN_OR_RETURN(const int sms, SmCount());
  const cudaStream_t stream = Stream();
  return DispatchFloat(logits.dtype(), "logits", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(logits.raw_data());
    int32_t* o = out.data<int32_t>();
    const int threads = ArgmaxThreads(rows, sms);
    const int splits = ArgmaxSplits(rows, n, VecWidth<T>(), sms, threads);
    return threads == 1024 ? LaunchArgmax<T, 1024>(x, o, rows, n, splits, stream)
                           : LaunchArgmax<T, 256>(x, o, rows, n, splits, stream);
  });
}

}  // namespace seam::kernels::cuda

// Mixture-of-experts routing and row movement on CUDA.
//
// MoeRoute: one block per token row. The row's logits are staged in shared
// memory as fp32; the softmax follows the CPU reference operation by operation
// (max, exp rounded once from a double-precision exp so it agrees with glibc's
// correctly rounded expf, a sequential sum in index order by one thread, a
// division per element), so probabilities are bit-identical to the CPU's. The
// top-k is a rank sort: every expert counts the experts that beat it (higher
// probability, or equal and lower index), which is exact, deterministic and
// O(E²/threads) — cheap for routers (E ≤ a few hundred; at most kMaxExperts).
// MoeRouteBiased is the same kernel ranking by probability + bias (one fp32
// add per expert, as the CPU) and weighing by probability × scaling; neither
// op synchronises with the host.
//
// GatherRows / ScatterAddRows: grid-stride copies. The rows are not checked on
// the host (that would need a synchronisation): a row index outside the table
// gives a zero output row in GatherRows and is skipped by ScatterAddRows,
// where the CPU reference returns INVALID_ARGUMENT. ScatterAddRows relies on
// the documented contract that rows are distinct (no atomics); repeated rows
// race on the GPU.
#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kMaxExperts = 4096;
constexpr int kRouteThreads = 256;

// exp(v) rounded once to fp32 (the double exp is within 1 ulp of double, so the
// fp32 result is the correctly rounded one except in vanishingly rare cases).
__device__ __forceinline__ float ExactExp(float v) { return static_cast<float>(exp(static_cast<double>(v))); }

template <typename T>
__global__ void __launch_bounds__(kRouteThreads)
    MoeRouteKernel(const T* __restrict__ logits, const float* __restrict__ bias, int experts, int top_k,
                   bool renormalize, float scaling, float* __restrict__ weights, int32_t* __restrict__ ids) {
  extern __shared__ float p[];                           // [experts]
  float* choice = p + experts;                           // [experts]: p + bias (p without a bias)
  int* order = reinterpret_cast<int*>(choice + experts);  // [top_k]: expert of each rank
  __shared__ float shared_max, shared_sum;
  const int64_t row = blockIdx.x;
  const T* in = logits + row * experts;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) p[e] = ToFloat(in[e]);
  __syncthreads();
  if (threadIdx.x == 0) {  // sequential, as the CPU reference (E is small)
    float mx = p[0];
    for (int e = 1; e < experts; ++e) mx = fmaxf(mx, p[e]);
    shared_max = mx;
  }
  __syncthreads();
  const float mx = shared_max;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) p[e] = ExactExp(__fsub_rn(p[e], mx));
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int e = 0; e < experts; ++e) sum = __fadd_rn(sum, p[e]);
    shared_sum = sum;
  }
  __syncthreads();
  const float sum = shared_sum;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    p[e] = __fdiv_rn(p[e], sum);
    choice[e] = bias == nullptr ? p[e] : __fadd_rn(p[e], bias[e]);
  }
  __syncthreads();
  // Rank of each expert in (choice descending, index ascending) order.
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    const float v = choice[e];
    int rank = 0;
    for (int j = 0; j < experts; ++j) rank += (choice[j] > v || (choice[j] == v && j < e)) ? 1 : 0;
    if (rank < top_k) order[rank] = e;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float kept = 0.f;
    for (int j = 0; j < top_k; ++j) kept = __fadd_rn(kept, p[order[j]]);
    shared_sum = kept;
  }
  __syncthreads();
  const float kept = shared_sum;
  for (int j = threadIdx.x; j < top_k; j += blockDim.x) {
    const float v = p[order[j]];
    weights[row * top_k + j] = renormalize ? __fdiv_rn(v, kept) : __fmul_rn(v, scaling);
    ids[row * top_k + j] = order[j];
  }
}

// Copies (or zeroes, for a row outside [0, n)) rows in units of U.
template <typename U>
__global__ void GatherRowsKernel(const U* __restrict__ x, const int32_t* __restrict__ rows, U* __restrict__ out,
                                 int64_t m, int64_t n, int64_t units_per_row) {
  const int64_t total = m * units_per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / units_per_row, c = e - i * units_per_row;
    const int32_t r = rows[i];
    if (r >= 0 && r < n) {
      out[e] = x[r * units_per_row + c];
    } else {
      out[e] = U{};
    }
  }
}

template <typename U>
absl::Status LaunchGather(const Tensor& x, const Tensor& rows, const Tensor& out, int64_t row_bytes,
                          cudaStream_t stream) {
  const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
  constexpr int kThreads = 256;
  GatherRowsKernel<U><<<GridFor(rows.dim(0) * units, kThreads), kThreads, 0, stream>>>(
      static_cast<const U*>(x.raw_data()), rows.data<int32_t>(), static_cast<U*>(out.raw_data()), rows.dim(0),
      x.dim(0), units);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// dst[rows[i]] += weights[i] · src[i]: fp32 multiply, then add (no fused
// multiply-add, as the CPU computes it), rounded once.
template <typename D, typename S>
__global__ void ScatterAddRowsKernel(D* __restrict__ dst, const S* __restrict__ src, const int32_t* __restrict__ rows,
                                     const float* __restrict__ weights, int64_t m, int64_t n, int64_t h) {
  const int64_t total = m * h;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / h, c = e - i * h;
    const int32_t r = rows[i];
    if (r < 0 || r >= n) continue;
    D* d = dst + r * h + c;
    *d = FromFloat<D>(__fadd_rn(ToFloat(*d), __fmul_rn(ToFloat(src[e]), weights[i])));
  }
}

// MoeRoute (bias null, scaling 1) and MoeRouteBiased (never renormalised).
absl::Status LaunchRoute(const Tensor& logits, const float* bias, int64_t top_k, bool renormalize, float scaling,
                         const Tensor& weights, const Tensor& ids) {
  const int64_t rows = logits.dim(0), experts = logits.dim(1);
  if (rows == 0) return absl::OkStatus();
  if (experts > kMaxExperts) {
    return absl::UnimplementedError(
        absl::StrCat("MoeRoute: the CUDA kernel takes at most ", kMaxExperts, " experts, got ", experts));
  }
  if (rows > 0x7fffffff) return absl::UnimplementedError("MoeRoute: too many rows");
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(logits, "MoeRoute"));
  const size_t shared = 2 * static_cast<size_t>(experts) * sizeof(float) + static_cast<size_t>(top_k) * sizeof(int);
  const cudaStream_t stream = Stream();
  return DispatchFloat(logits.dtype(), "logits", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    MoeRouteKernel<T><<<static_cast<unsigned int>(rows), kRouteThreads, shared, stream>>>(
        static_cast<const T*>(logits.raw_data()), bias, static_cast<int>(experts), static_cast<int>(top_k),
        renormalize, scaling, weights.data<float>(), ids.data<int32_t>());
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool renormalize, const Tensor& weights,
                      const Tensor& ids) {
  return LaunchRoute(logits, nullptr, top_k, renormalize, 1.0f, weights, ids);
}

absl::Status MoeRouteBiased(const Tensor& logits, const Tensor& bias, int64_t top_k, float scaling,
                            const Tensor& weights, const Tensor& ids) {
  return LaunchRoute(logits, bias.data<float>(), top_k, false, scaling, weights, ids);
}

absl::Status GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  const int64_t row_bytes = x.dim(1) * static_cast<int64_t>(DTypeSize(x.dtype()));
  if (rows.dim(0) == 0 || row_bytes == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "GatherRows"));
  const cudaStream_t stream = Stream();
  switch (RowCopyUnit(row_bytes, x.raw_data(), out.raw_data())) {
    case 16: return LaunchGather<uint4>(x, rows, out, row_bytes, stream);
    case 8: return LaunchGather<uint2>(x, rows, out, row_bytes, stream);
    case 4: return LaunchGather<uint32_t>(x, rows, out, row_bytes, stream);
    case 2: return LaunchGather<uint16_t>(x, rows, out, row_bytes, stream);
    default: return LaunchGather<uint8_t>(x, rows, out, row_bytes, stream);
  }
}

absl::Status ScatterAddRows(const Tensor& dst, const Tensor& src, const Tensor& rows, const Tensor& weights) {
  const int64_t m = rows.dim(0), n = dst.dim(0), h = dst.dim(1);
  if (m == 0 || h == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(dst, "ScatterAddRows"));
  const cudaStream_t stream = Stream();
  return DispatchFloat(dst.dtype(), "dst", [&](auto dtag) -> absl::Status {
    using D = typename decltype(dtag)::type;
    return DispatchFloat(src.dtype(), "src", [&](auto stag) -> absl::Status {
      using S = typename decltype(stag)::type;
      constexpr int kThreads = 256;
      ScatterAddRowsKernel<D, S><<<GridFor(m * h, kThreads), kThreads, 0, stream>>>(
          static_cast<D*>(dst.raw_data()), static_cast<const S*>(src.raw_data()), rows.data<int32_t>(),
          weights.data<float>(), m, n, h);
      SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  });
}

}  // namespace seam::kernels::cuda

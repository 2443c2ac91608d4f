// The device-side expert ops of seam/kernels/moe_experts.h on CUDA. None
// reads anything back to the host, so a decode step using them can be
// captured as a CUDA graph.
//
// - SortRoutesByExpert: one thread per row, an insertion sort (stable, as
//   the CPU's) of its G ≤ 64 routes in place.
// - GroupByExpert: one block. Per-expert counts by shared-memory atomics, a
//   block-wide exclusive scan over the experts (each thread a contiguous run
//   of experts) giving the offsets and the ranks of the experts that have
//   pairs, then every pair placed through its expert's atomic cursor; a
//   second scan over the active experts gives the tensor-core kernel's tile
//   starts.
// - ExpertMatmul: matmul.cu's GEMV per expert. The grid is (feature tiles,
//   min(E, P) expert slots); the block of slot s serves the s-th expert that
//   has pairs (and returns at once when fewer have), its warps each own
//   kRowsPerWarp output features of that expert, stream their weight rows
//   in 16-byte lane slices and multiply them with up to kChunk of the
//   expert's pairs' x rows per pass, fp32 accumulation reduced by warp
//   shuffles. A pair's sum visits K in the same order whichever pass and
//   chunk size holds it, so the result does not depend on how pairs group.
//   An expert with more than kChunk pairs re-reads its weight rows per pass
//   (from L2, mostly): decode batches give a few pairs per expert.
// - GatherPairs / ScatterPairs: grid-stride row copies in 16-byte units
//   where rows and addresses allow, up to the grouped count read on the
//   device.
// - IdentityExpertPairs: grid-stride row copies (or zero fills) of the
//   pairs whose id marks an identity expert, in the same units.
// - MoeFinalize: grid-stride over [T, H], one fmaf per expert in g order.
#include <algorithm>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "warp_sum_store.cuh"

namespace seam::kernels::cuda {
namespace {

// ---- SortRoutesByExpert --------------------------------------------------------

constexpr int kSortThreads = 128;
constexpr int kSortInRegisters = 16;  // routes per row sorted in registers (LongCat-Flash: 12)

// Sort of one row's routes by expert id (stable: equal ids keep their
// order). Rows of up to kSortInRegisters routes are read once, sorted
// in registers and written once (a batch-32 LongCat-Flash step's sort in
// global memory, 12 routes a row, took ~9 us on an H200); longer rows sort in
// place.
__global__ void SortRoutesKernel(float* __restrict__ weights, int32_t* __restrict__ ids, int64_t rows, int g) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float* w = weights + r * g;
  int32_t* e = ids + r * g;
  if (g <= kSortInRegisters) {
    float wv[kSortInRegisters];
    int32_t ev[kSortInRegisters];
#pragma unroll
    for (int i = 0; i < kSortInRegisters; ++i) {
      if (i < g) wv[i] = w[i], ev[i] = e[i];
    }
    // Bubble passes over a fixed-size array keep it in registers (no dynamic indexing).
#pragma unroll
    for (int pass = 0; pass < kSortInRegisters - 1; ++pass) {
#pragma unroll
      for (int i = 0; i + 1 < kSortInRegisters; ++i) {
        if (i + 1 < g && ev[i] > ev[i + 1]) {
          const int32_t te = ev[i];
          ev[i] = ev[i + 1], ev[i + 1] = te;
          const float tw = wv[i];
          wv[i] = wv[i + 1], wv[i + 1] = tw;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kSortInRegisters; ++i) {
      if (i < g) w[i] = wv[i], e[i] = ev[i];
    }
    return;
  }
  for (int i = 1; i < g; ++i) {
    const int32_t id = e[i];
    const float v = w[i];
    int j = i - 1;
    for (; j >= 0 && e[j] > id; --j) {
      e[j + 1] = e[j];
      w[j + 1] = w[j];
    }
    e[j + 1] = id;
    w[j + 1] = v;
  }
}

// ---- GroupByExpert -------------------------------------------------------------

constexpr int kGroupThreads = 1024;

// Exclusive prefix sums over the block of two counters per thread (in
// thread order); their block totals land in *total_a and *total_b (shared).
__device__ void BlockExclusiveScan2(int& a, int& b, int* total_a, int* total_b) {
  __shared__ int warp_a[32], warp_b[32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  int ia = a, ib = b;  // inclusive within the warp
  for (int o = 1; o < 32; o <<= 1) {
    const int ta = __shfl_up_sync(0xffffffffu, ia, o), tb = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) ia += ta, ib += tb;
  }
  if (lane == 31) warp_a[warp] = ia, warp_b[warp] = ib;
  __syncthreads();
  if (warp == 0) {
    int va = lane < warps ? warp_a[lane] : 0, vb = lane < warps ? warp_b[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int ta = __shfl_up_sync(0xffffffffu, va, o), tb = __shfl_up_sync(0xffffffffu, vb, o);
      if (lane >= o) va += ta, vb += tb;
    }
    if (lane < warps) warp_a[lane] = va, warp_b[lane] = vb;  // inclusive over warps
    if (lane == warps - 1) *total_a = va, *total_b = vb;
  }
  __syncthreads();
  a = (warp > 0 ? warp_a[warp - 1] : 0) + ia - a;
  b = (warp > 0 ? warp_b[warp - 1] : 0) + ib - b;
}

// tile_starts[a] for the a < active[0] experts with pairs (in active's
// order) and tile_starts[active[0]]: running sums of each one's tiles of
// kExpertTileRows pairs. Reads offsets and active as this block wrote them.
__device__ void TileStarts(const int32_t* offsets, const int32_t* active, int used, int32_t* tile_starts) {
  __shared__ int total_tiles, unused;
  const int chunk = (used + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int lo = min(used, static_cast<int>(threadIdx.x) * chunk), hi = min(used, lo + chunk);
  constexpr int kTile = static_cast<int>(kExpertTileRows);
  int run = 0, none = 0;
  for (int a = lo; a < hi; ++a) {
    const int e = active[1 + a];
    run += (offsets[e + 1] - offsets[e] + kTile - 1) / kTile;
  }
  BlockExclusiveScan2(run, none, &total_tiles, &unused);
  for (int a = lo; a < hi; ++a) {
    const int e = active[1 + a];
    tile_starts[a] = run;
    run += (offsets[e + 1] - offsets[e] + kTile - 1) / kTile;
  }
  if (threadIdx.x == 0) tile_starts[used] = total_tiles;
}

__global__ void __launch_bounds__(kGroupThreads)
    GroupByExpertKernel(const int32_t* __restrict__ ids, int pairs, int experts, int32_t* __restrict__ offsets,
                        int32_t* __restrict__ order, int32_t* __restrict__ active,
                        int32_t* __restrict__ tile_starts) {
  extern __shared__ int count[];  // [experts]: counts, then cursors
  __shared__ int total_pairs, total_active;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = ids[p];
    if (e >= 0 && e < experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  const int chunk = (experts + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int lo = min(experts, static_cast<int>(threadIdx.x) * chunk), hi = min(experts, lo + chunk);
  int run = 0, used = 0;
  for (int e = lo; e < hi; ++e) run += count[e], used += count[e] > 0 ? 1 : 0;
  BlockExclusiveScan2(run, used, &total_pairs, &total_active);
  for (int e = lo; e < hi; ++e) {
    const int c = count[e];
    offsets[e] = run;
    if (c > 0) active[1 + used++] = e;
    count[e] = run;
    run += c;
  }
  if (threadIdx.x == 0) offsets[experts] = total_pairs, active[0] = total_active;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = ids[p];
    if (e >= 0 && e < experts) order[atomicAdd(&count[e], 1)] = p;
  }
  __syncthreads();  // offsets and active written; the scan's shared totals free again
  TileStarts(offsets, active, total_active, tile_starts);
}

// ---- ExpertMatmul --------------------------------------------------------------

constexpr int kWarps = 4;        // warps per block
constexpr int kRowsPerWarp = 2;  // output features per warp
constexpr int kChunk = 8;        // pairs multiplied per pass over the weight rows
constexpr int kUnroll = 4;       // 16-byte weight loads in flight per lane and feature

// acc[r][m] += w_r[vector i] · x_m[vector i].
template <typename T, int M, int R>
__device__ __forceinline__ void ExpertStep(const uint4 (&wv)[R], const uint4* const (&xrow)[M], int64_t i,
                                           float (&acc)[R][M]) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  float wf[R][V];
#pragma unroll
  for (int r = 0; r < R; ++r) WidenVec<T>(wv[r], wf[r]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[V];
    WidenVec<T>(__ldg(xrow[m] + i), xf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
    }
  }
}

// One pass: the warp's R features of one expert against M pairs (pair[0, M)).
template <typename T, int M>
__device__ __forceinline__ void ExpertPass(const uint4* const (&wrow)[kRowsPerWarp], const int32_t* pair,
                                           const T* __restrict__ x, int64_t kv, int per_row, int64_t n,
                                           int64_t first, int lane, T* __restrict__ out) {
  constexpr int R = kRowsPerWarp;
  int32_t p[M];
  const uint4* xrow[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    p[m] = pair[m];
    xrow[m] = reinterpret_cast<const uint4*>(x) + static_cast<int64_t>(p[m] / per_row) * kv;
  }
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;
  }
  int64_t base = 0;
  for (; base + 32 * kUnroll <= kv; base += 32 * kUnroll) {
    uint4 wv[kUnroll][R];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = __ldg(wrow[r] + base + 32 * u + lane);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) ExpertStep<T, M, R>(wv[u], xrow, base + 32 * u + lane, acc);
  }
  for (int64_t i = base + lane; i < kv; i += 32) {
    uint4 wv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wv[r] = __ldg(wrow[r] + i);
    ExpertStep<T, M, R>(wv, xrow, i, acc);
  }
  int64_t out_row[M];
#pragma unroll
  for (int m = 0; m < M; ++m) out_row[m] = p[m];
  WarpSumAndStore<T, M, R>(acc, out_row, first, n, lane, out);
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    ExpertMatmulKernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                       const int32_t* __restrict__ offsets, const int32_t* __restrict__ order,
                       const int32_t* __restrict__ active, int64_t n, int64_t k, int per_row) {
  constexpr int R = kRowsPerWarp;
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  if (static_cast<int>(blockIdx.y) >= active[0]) return;  // fewer experts have pairs
  const int e = active[1 + blockIdx.y];
  const int begin = offsets[e], end = offsets[e + 1];
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * R;
  if (first >= n) return;  // warp-uniform; no block-wide synchronisation follows
  const int64_t kv = k / V;
  const T* we = w + static_cast<int64_t>(e) * n * k;
  const uint4* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t f = first + r < n ? first + r : n - 1;  // past the end: reread the last row, not written
    wrow[r] = reinterpret_cast<const uint4*>(we + f * k);
  }
  for (int c = begin; c < end; c += kChunk) {
    const int32_t* pair = order + c;
    switch (min(kChunk, end - c)) {
      case 1: ExpertPass<T, 1>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      case 2: ExpertPass<T, 2>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      case 3: ExpertPass<T, 3>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      case 4: ExpertPass<T, 4>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      case 5: ExpertPass<T, 5>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      case 6: ExpertPass<T, 6>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      case 7: ExpertPass<T, 7>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
      default: ExpertPass<T, 8>(wrow, pair, x, kv, per_row, n, first, lane, out); break;
    }
  }
}
static_assert(kChunk == 8, "ExpertMatmulKernel's switch covers 1..8 pairs a pass");

// ---- GatherPairs / ScatterPairs -------------------------------------------------

// Row i of the grouped pairs (i < offsets[E]): gather copies x row order[i] /
// per_row to out row i, scatter copies src row i to out row order[i]; rows in
// units of U.
template <typename U, bool kGather>
__global__ void PairRowsKernel(const U* __restrict__ in, U* __restrict__ out, const int32_t* __restrict__ order,
                               const int32_t* __restrict__ grouped_end, int per_row, int64_t units_per_row,
                               int64_t pairs) {
  const int64_t grouped = *grouped_end;
  const int64_t total = grouped * units_per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / units_per_row, c = e - i * units_per_row;
    const int64_t p = order[i];
    if (p < 0 || p >= pairs) continue;
    if constexpr (kGather) {
      out[e] = in[(p / per_row) * units_per_row + c];
    } else {
      out[p * units_per_row + c] = in[e];
    }
  }
}

template <bool kGather>
absl::Status LaunchPairRows(const Tensor& in, const ExpertGroups& groups, const Tensor& out, int per_row) {
  const int64_t row_bytes = out.dim(1) * static_cast<int64_t>(DTypeSize(out.dtype()));
  const int64_t pairs = groups.pairs();
  if (pairs == 0 || row_bytes == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(out, kGather ? "GatherPairs" : "ScatterPairs"));
  const cudaStream_t stream = Stream();
  auto launch = [&](auto unit) -> absl::Status {
    using U = decltype(unit);
    const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
    constexpr int kThreads = 256;
    PairRowsKernel<U, kGather><<<GridFor(pairs * units, kThreads), kThreads, 0, stream>>>(
        static_cast<const U*>(in.raw_data()), static_cast<U*>(out.raw_data()), groups.order.data<int32_t>(),
        groups.offsets.data<int32_t>() + groups.experts(), per_row, units, pairs);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  };
  return LaunchByRowCopyUnit(row_bytes, in.raw_data(), out.raw_data(), launch);
}

// ---- IdentityExpertPairs -------------------------------------------------------

// out[p] = x[p / G] (or zeros) for the pairs p whose expert id is ≥ first, in units of U.
template <typename U>
__global__ void IdentityPairsKernel(const U* __restrict__ x, const int32_t* __restrict__ ids, U* __restrict__ out,
                                    int64_t first, bool copy_input, int64_t per_row, int64_t units,
                                    int64_t pairs) {
  const int64_t total = pairs * units;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = i / units, c = i - p * units;
    if (ids[p] < first) continue;
    out[i] = copy_input ? x[(p / per_row) * units + c] : U{};
  }
}

// ---- MoeFinalize ---------------------------------------------------------------

template <typename T, typename O>
__global__ void MoeFinalizeKernel(const T* __restrict__ expert_out, const float* __restrict__ scales,
                                  O* __restrict__ out, int64_t rows, int g, int64_t h) {
  const int64_t total = rows * h;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / h, c = i - t * h;
    float f = 0.f;
    for (int j = 0; j < g; ++j) f = fmaf(scales[t * g + j], ToFloat(expert_out[(t * g + j) * h + c]), f);
    out[i] = FromFloat<O>(f);
  }
}

}  // namespace

absl::Status SortRoutesByExpert(const Tensor& weights, const Tensor& ids) {
  const int64_t rows = ids.dim(0), g = ids.dim(1);
  if (rows == 0 || g < 2) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(ids, "SortRoutesByExpert"));
  SortRoutesKernel<<<GridFor(rows, kSortThreads), kSortThreads, 0, Stream()>>>(
      weights.data<float>(), ids.data<int32_t>(), rows, static_cast<int>(g));
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status GroupByExpert(const Tensor& ids, const ExpertGroups& groups) {
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(groups.offsets, "GroupByExpert"));
  const int experts = static_cast<int>(groups.experts());
  GroupByExpertKernel<<<1, kGroupThreads, static_cast<size_t>(experts) * sizeof(int), Stream()>>>(
      ids.data<int32_t>(), static_cast<int>(groups.pairs()), experts, groups.offsets.data<int32_t>(),
      groups.order.data<int32_t>(), groups.active.data<int32_t>(), groups.tile_starts.data<int32_t>());
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status ExpertMatmul(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out) {
  const int64_t pairs = groups.pairs(), n = w.dim(1), k = w.dim(2);
  if (pairs == 0 || n == 0) return absl::OkStatus();
  if (!ExpertMatmulTakes(x.dtype(), k) || out.dtype() != x.dtype() || !VecAligned<uint4>(x.raw_data(), 1) ||
      !VecAligned<uint4>(w.raw_data(), 1)) {
    return absl::UnimplementedError(absl::StrCat(
        "ExpertMatmul: the CUDA kernel takes x, w and out of one dtype with 16-byte aligned rows (x ",
        DTypeName(x.dtype()), " [", x.dim(0), ", ", k, "], out ", DTypeName(out.dtype()), ")"));
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "ExpertMatmul"));
  const int64_t per_block = int64_t{kWarps} * kRowsPerWarp;
  const dim3 grid(static_cast<unsigned int>((n + per_block - 1) / per_block),
                  static_cast<unsigned int>(std::min(groups.experts(), pairs)));
  const int per_row = static_cast<int>(pairs / x.dim(0));
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    ExpertMatmulKernel<T><<<grid, kWarps * 32, 0, stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<const T*>(w.raw_data()), static_cast<T*>(out.raw_data()),
        groups.offsets.data<int32_t>(), groups.order.data<int32_t>(), groups.active.data<int32_t>(), n, k,
        per_row);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out) {
  return LaunchPairRows<true>(x, groups, out, x.dim(0) > 0 ? static_cast<int>(groups.pairs() / x.dim(0)) : 1);
}

absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out) {
  return LaunchPairRows<false>(src, groups, out, 1);
}

absl::Status IdentityExpertPairs(const Tensor& x, const Tensor& ids, int64_t first, bool copy_input,
                                 const Tensor& out) {
  const int64_t row_bytes = x.dim(1) * static_cast<int64_t>(DTypeSize(x.dtype()));
  const int64_t pairs = ids.numel();
  if (pairs == 0 || row_bytes == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(out, "IdentityExpertPairs"));
  const cudaStream_t stream = Stream();
  auto launch = [&](auto unit) -> absl::Status {
    using U = decltype(unit);
    const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
    constexpr int kThreads = 256;
    IdentityPairsKernel<U><<<GridFor(pairs * units, kThreads), kThreads, 0, stream>>>(
        static_cast<const U*>(x.raw_data()), ids.data<int32_t>(), static_cast<U*>(out.raw_data()), first,
        copy_input, ids.dim(1), units, pairs);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  };
  return LaunchByRowCopyUnit(row_bytes, x.raw_data(), out.raw_data(), launch);
}

absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out) {
  const int64_t rows = expert_out.dim(0), g = expert_out.dim(1), h = expert_out.dim(2);
  if (rows == 0 || h == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(expert_out, "MoeFinalize"));
  const cudaStream_t stream = Stream();
  return DispatchFloat(expert_out.dtype(), "expert_out", [&](auto xt) -> absl::Status {
    using T = typename decltype(xt)::type;
    return DispatchSameOrF32<T>(out.dtype(), "out", [&](auto ot) -> absl::Status {
      using O = typename decltype(ot)::type;
      constexpr int kThreads = 256;
      MoeFinalizeKernel<T, O><<<GridFor(rows * h, kThreads), kThreads, 0, stream>>>(
          static_cast<const T*>(expert_out.raw_data()), scales.data<float>(), static_cast<O*>(out.raw_data()),
          rows, static_cast<int>(g), h);
      SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  });
}

}  // namespace seam::kernels::cuda

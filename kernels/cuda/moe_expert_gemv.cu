// The decode kernel of the fused expert pair (moe_expert_gemm.h): a GEMV
// per expert that reads each weight row once per 8 of the expert's pairs,
// however few pairs the expert has.
//
// Grid (feature tiles, min(E, P) expert slots); the block of slot s serves
// the s-th expert with pairs (returning at once when fewer have). A block is
// 8 warps (two blocks an SM); a warp owns a unit of two weight rows
// (gate-up: act feature j's gate row j and up row I + j, so the SiLU-mul
// happens in the warp; down: output features 2u and 2u + 1), up to
// kMaxUnits units per pass (`fm`). Per pass of up to 8 of the expert's pairs, the pairs' x
// rows are staged in shared memory in slices of 256 16-byte vectors (4 KiB
// of bf16), and each lane streams its units' weight rows in 16-byte vectors
// (lane l takes vectors l, l + 32, ...; four in flight per row; the first
// four of the first unit issued before the staging) against them,
// accumulating in fp32; a warp's sums meet by shuffles. A lane's
// vectors and their order do not depend on the pass, the slice or the
// tile, so a pair's output does not depend on the other pairs.
//
// Each block's weight bytes dwarf its staged x bytes at decode (16 rows of
// K against up to 8 rows of K), and a batch of ~100 experts × 2-3 pairs
// makes ~10,000 blocks of 16 KiB+ of weights, enough to fill the SMs
// without splitting K.
#include <algorithm>

#include "cuda_common.cuh"
#include "moe_expert_gemm.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kPassPairs = 8;   // pairs per pass over the weight rows
constexpr int kSliceVecs = 256;  // staged 16-byte vectors per x row (a multiple of 32: lanes keep their order)
constexpr int kUnroll = 4;      // weight vectors in flight per lane and row
constexpr int kMaxUnits = 1;    // units per warp and pass

template <typename T, int M>
__device__ __forceinline__ void UnitStep(const uint4 (&wv)[2], const uint4* xs, int i, float (&acc)[2][M]) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  float wf[2][V];
  WidenVec<T>(wv[0], wf[0]);
  WidenVec<T>(wv[1], wf[1]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[V];
    WidenVec<T>(xs[m * kSliceVecs + i], xf);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
    }
  }
}

// The lane's first kUnroll vectors of a unit's two rows in slice 0 (those
// before sv), loaded before the x rows are staged, so the pass's first
// weight loads overlap the staging's (the block's dependent loads of the
// expert, its pairs and their rows).
template <typename T>
__device__ __forceinline__ void Preload(const uint4* const (&row)[2], int sv, int lane, uint4 (&pre)[kUnroll][2]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const bool in = lane + 32 * u < sv;
    pre[u][0] = in ? __ldg(row[0] + lane + 32 * u) : uint4{0, 0, 0, 0};
    pre[u][1] = in ? __ldg(row[1] + lane + 32 * u) : uint4{0, 0, 0, 0};
  }
}

// acc += the unit's two weight rows (vectors [s0, s0 + sv)) against the
// staged slice; with kPre, its first kUnroll vectors are `pre`. Either way a
// lane visits its vectors in ascending order.
template <typename T, int M, bool kPre>
__device__ __forceinline__ void UnitSlice(const uint4* const (&row)[2], int64_t s0, int sv, const uint4* xs,
                                          int lane, float (&acc)[2][M], const uint4 (&pre)[kUnroll][2]) {
  int i = lane;
  if constexpr (kPre) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i + 32 * u < sv) UnitStep<T, M>(pre[u], xs, i + 32 * u, acc);
    }
    i += 32 * kUnroll;
  }
  for (; i + 32 * (kUnroll - 1) < sv; i += 32 * kUnroll) {
    uint4 wv[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      wv[u][0] = __ldg(row[0] + s0 + i + 32 * u);
      wv[u][1] = __ldg(row[1] + s0 + i + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) UnitStep<T, M>(wv[u], xs, i + 32 * u, acc);
  }
  for (; i < sv; i += 32) {
    const uint4 wv[2] = {__ldg(row[0] + s0 + i), __ldg(row[1] + s0 + i)};
    UnitStep<T, M>(wv, xs, i, acc);
  }
}

// The warp's sums of each unit's two rows against the M pairs, stored by
// lane m: gate_up as SiLU(g)·u in pair order, down as two features at the
// route's row.
template <typename T, int M>
__device__ __forceinline__ void ReduceAndStore(const ExpertGemmArgs& a, int c, int lane,
                                               const int64_t (&unit)[kMaxUnits],
                                               float (&acc)[kMaxUnits][2][M]) {
#pragma unroll
  for (int q = 0; q < kMaxUnits; ++q) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float v = acc[q][r][m];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[q][r][m] = v;
      }
    }
  }
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int q = 0; q < kMaxUnits; ++q) {
    if (unit[q] < 0) continue;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (lane != m) continue;
      if (a.gate_up) {  // ExpertMatmul's rounding of g and u, then SiluAndMul's arithmetic
        const float g = ToFloat(FromFloat<T>(acc[q][0][m])), u = ToFloat(FromFloat<T>(acc[q][1][m]));
        out[static_cast<int64_t>(c + m) * a.out_cols + unit[q]] = FromFloat<T>(g / (1.f + expf(-g)) * u);
      } else {
        const int64_t base = static_cast<int64_t>(a.order[c + m]) * a.out_cols + 2 * unit[q];
        out[base] = FromFloat<T>(acc[q][0][m]);
        if (2 * unit[q] + 1 < a.out_cols) out[base + 1] = FromFloat<T>(acc[q][1][m]);
      }
    }
  }
}

// One pass: the block's units against the M pairs at group positions [c, c + M).
template <typename T, int M>
__device__ __forceinline__ void Pass(const ExpertGemmArgs& a, int e, int c, int fm, uint4* xs) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t kv = a.k / V;
  const int64_t units = a.gate_up ? a.out_cols : (a.out_cols + 1) / 2;
  const uint4* x = static_cast<const uint4*>(a.x);
  const T* we = static_cast<const T*>(a.w) + static_cast<int64_t>(e) * a.weight_rows * a.k;
  int64_t xrow[M];
#pragma unroll
  for (int m = 0; m < M; ++m) xrow[m] = a.gate_up ? a.order[c + m] / a.per_row : c + m;
  // The warp's units and their two weight rows (an invalid unit reads row 0 and stores nothing).
  int64_t unit[kMaxUnits];
  const uint4* row[kMaxUnits][2];
#pragma unroll
  for (int q = 0; q < kMaxUnits; ++q) {
    unit[q] = (static_cast<int64_t>(blockIdx.x) * fm + q) * kWarps + warp;
    const bool valid = q < fm && unit[q] < units;
    if (!valid) unit[q] = -1;
    int64_t r0 = 0, r1 = 0;
    if (valid) {
      r0 = a.gate_up ? unit[q] : 2 * unit[q];
      r1 = a.gate_up ? a.out_cols + unit[q] : (2 * unit[q] + 1 < a.out_cols ? 2 * unit[q] + 1 : r0);
    }
    row[q][0] = reinterpret_cast<const uint4*>(we + r0 * a.k);
    row[q][1] = reinterpret_cast<const uint4*>(we + r1 * a.k);
  }
  float acc[kMaxUnits][2][M];
#pragma unroll
  for (int q = 0; q < kMaxUnits; ++q) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int m = 0; m < M; ++m) acc[q][r][m] = 0.0f;
    }
  }
  uint4 pre[kUnroll][2];  // the first unit's first vectors of slice 0
  Preload<T>(row[0], kv < kSliceVecs ? static_cast<int>(kv) : kSliceVecs, lane, pre);
  for (int64_t s0 = 0; s0 < kv; s0 += kSliceVecs) {
    const int sv = kv - s0 < kSliceVecs ? static_cast<int>(kv - s0) : kSliceVecs;
    __syncthreads();  // the previous slice (or pass) is no longer read
    for (int idx = static_cast<int>(threadIdx.x); idx < M * sv; idx += kThreads) {
      const int m = idx / sv, v = idx - m * sv;
      xs[m * kSliceVecs + v] = __ldg(x + xrow[m] * kv + s0 + v);
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMaxUnits; ++q) {
      if (unit[q] < 0) continue;  // warp-uniform
      if (q == 0 && s0 == 0) {
        UnitSlice<T, M, true>(row[q], s0, sv, xs, lane, acc[q], pre);
      } else {
        UnitSlice<T, M, false>(row[q], s0, sv, xs, lane, acc[q], pre);
      }
    }
  }
  ReduceAndStore<T, M>(a, c, lane, unit, acc);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 2) ExpertGemvKernel(ExpertGemmArgs a, int fm) {
  __shared__ uint4 xs[kPassPairs * kSliceVecs];
  if (static_cast<int>(blockIdx.y) >= a.active[0]) return;  // fewer experts have pairs (block-uniform)
  const int e = a.active[1 + blockIdx.y];
  const int begin = a.offsets[e], end = a.offsets[e + 1];
  for (int c = begin; c < end; c += kPassPairs) {
    switch (min(kPassPairs, end - c)) {
      case 1: Pass<T, 1>(a, e, c, fm, xs); break;
      case 2: Pass<T, 2>(a, e, c, fm, xs); break;
      case 3: Pass<T, 3>(a, e, c, fm, xs); break;
      case 4: Pass<T, 4>(a, e, c, fm, xs); break;
      case 5: Pass<T, 5>(a, e, c, fm, xs); break;
      case 6: Pass<T, 6>(a, e, c, fm, xs); break;
      case 7: Pass<T, 7>(a, e, c, fm, xs); break;
      default: Pass<T, 8>(a, e, c, fm, xs); break;
    }
  }
}
static_assert(kPassPairs == 8, "the switch covers 1..8 pairs a pass");
static_assert(kSliceVecs % 32 == 0, "a slice keeps every lane's vectors in order");
static_assert(kPassPairs <= 32, "lane m stores pair m's outputs");

}  // namespace

absl::Status LaunchExpertGemv(DType dtype, const ExpertGemmArgs& a, cudaStream_t stream) {
  const int64_t units = a.gate_up ? a.out_cols : (a.out_cols + 1) / 2;
  const int64_t slots = std::min(a.experts, a.pairs);
  // Two units a warp where one would already give many blocks (fewer x
  // re-stagings), as far as kMaxUnits allows: one, while the first unit's
  // preload and two units' sums do not fit two blocks an SM's registers.
  const int fm = std::min(kMaxUnits, (units + kWarps - 1) / kWarps * slots >= 4096 ? 2 : 1);
  const int64_t tiles = (units + int64_t{kWarps} * fm - 1) / (int64_t{kWarps} * fm);
  if (tiles > 0x7fffffff || slots > 65535) {
    return absl::UnimplementedError(absl::StrCat("expert GEMV: grid of ", tiles, " x ", slots, " blocks"));
  }
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(slots));
  return DispatchFloat(dtype, "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    ExpertGemvKernel<T><<<grid, kThreads, 0, stream>>>(a, fm);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace seam::kernels::cuda

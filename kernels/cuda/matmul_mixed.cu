// Matmul for x and w of different dtypes at decode-sized M (matmul_mixed.cuh).
//
// Design: a block of kMixedWarps warps computes F output features for up to
// M rows of x (F = 4, M = 8; F = 2, M = 1 for one row, so a 96-feature
// router still spreads over 48 blocks); its warps split K between them
// (lane l of warp w takes the 4-element vectors w·32 + l, then every
// kMixedWarps·32th, two at a time so that a lane has 2·(F + M) loads in
// flight). Each lane keeps fp32 partial sums for every (feature, row);
// warps sum by shuffles, then through shared memory, in a fixed order (the
// same bits on every run). Graph-capturable: no allocation, no
// synchronisation with the host.
#include <cstdint>

#include "cuda_common.cuh"
#include "matmul_mixed.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kMixedWarps = 8;
constexpr int kMixedUnroll = 2;  // K vectors per lane per iteration, their loads issued together

template <typename X, typename W, typename O, int F, int M>
__global__ void __launch_bounds__(kMixedWarps * 32)
    MixedMatmulKernel(const X* __restrict__ x, const W* __restrict__ w, O* __restrict__ out, int64_t m, int64_t n,
                      int64_t k) {
  constexpr int U = kMixedUnroll;
  __shared__ float partial[kMixedWarps][F][M];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * F;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * M;
  const W* wrow[F];
#pragma unroll
  for (int f = 0; f < F; ++f) wrow[f] = w + (first + f < n ? first + f : n - 1) * k;  // past n: reread, not written
  const X* xrow[M];
#pragma unroll
  for (int r = 0; r < M; ++r) xrow[r] = x + (row0 + r < m ? row0 + r : m - 1) * k;
  float acc[F][M];
#pragma unroll
  for (int f = 0; f < F; ++f) {
#pragma unroll
    for (int r = 0; r < M; ++r) acc[f][r] = 0.f;
  }
  constexpr int64_t kStride = 4 * kMixedWarps * 32;  // elements between a lane's consecutive vectors
  for (int64_t i = 4 * (static_cast<int64_t>(warp) * 32 + lane); i < k; i += U * kStride) {
    float wf[U][F][4], xf[U][M][4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t at = i + u * kStride;
      if (at >= k) continue;
#pragma unroll
      for (int f = 0; f < F; ++f) LoadFloats<W, 4>(wrow[f] + at, wf[u][f]);
#pragma unroll
      for (int r = 0; r < M; ++r) LoadFloats<X, 4>(xrow[r] + at, xf[u][r]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i + u * kStride >= k) continue;
#pragma unroll
      for (int f = 0; f < F; ++f) {
#pragma unroll
        for (int r = 0; r < M; ++r) {
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[f][r] = fmaf(xf[u][r][j], wf[u][f][j], acc[f][r]);
        }
      }
    }
  }
#pragma unroll
  for (int f = 0; f < F; ++f) {
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const float v = WarpSum(acc[f][r]);
      if (lane == 0) partial[warp][f][r] = v;
    }
  }
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  if (t < F * M) {
    const int f = t / M, r = t % M;
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < kMixedWarps; ++q) s += partial[q][f][r];
    if (first + f < n && row0 + r < m) out[(row0 + r) * n + first + f] = FromFloat<O>(s);
  }
}

template <typename X, typename W, typename O, int F, int M>
absl::Status LaunchRows(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  const dim3 grid(static_cast<unsigned int>((n + F - 1) / F), static_cast<unsigned int>((m + M - 1) / M));
  MixedMatmulKernel<X, W, O, F, M><<<grid, kMixedWarps * 32, 0, stream>>>(
      static_cast<const X*>(x.raw_data()), static_cast<const W*>(w.raw_data()), static_cast<O*>(out.raw_data()), m,
      n, k);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

bool MixedEligible(const Tensor& x, const Tensor& w, int64_t m, int64_t k) {
  const auto floating = [](DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; };
  if (x.dtype() == w.dtype() || !floating(x.dtype()) || !floating(w.dtype())) return false;
  if (m > kMixedMaxRows || k % 4 != 0) return false;
  const auto aligned = [](const Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.raw_data()) % (4 * DTypeSize(t.dtype())) == 0;
  };
  return aligned(x) && aligned(w);
}

absl::Status LaunchMixed(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  return DispatchFloat3(x.dtype(), "x", w.dtype(), "w", out.dtype(), "out",
                        [&](auto xt, auto wt, auto ot) -> absl::Status {
                          using X = typename decltype(xt)::type;
                          using W = typename decltype(wt)::type;
                          using O = typename decltype(ot)::type;
                          // One row: no partial sums of rows that do not exist, and more blocks.
                          return x.dim(0) == 1 ? LaunchRows<X, W, O, 2, 1>(x, w, out, stream)
                                               : LaunchRows<X, W, O, 4, 8>(x, w, out, stream);
                        });
}

}  // namespace seam::kernels::cuda

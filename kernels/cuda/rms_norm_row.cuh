// The arithmetic of one RMSNorm row on CUDA (internal to kernels/cuda), in one
// place because norm.cu (RMSNorm, fused add + RMSNorm) and allreduce_norm.cu
// (one-shot all-reduce + add + RMSNorm) must agree bit for bit: the threads
// per row, each thread's fp32 sum of squares in element order, the warp and
// block reduction order, a correctly rounded 1 / sqrt(mean + eps) (not
// rsqrtf, as the CPU reference computes it) and out = s * inv * w in that order.
#pragma once

#include <cstdint>

namespace seam::kernels::cuda {

constexpr int kRmsNormMaxThreadsPerRow = 1024;
constexpr int kRmsNormSmallRowVectors = 64;  // rows of at most this many vectors get one warp

// Threads per row for a row of nvec vectors: a warp for small rows, else the
// vector count rounded up to warps, at most kRmsNormMaxThreadsPerRow.
inline int RmsNormRowThreads(int64_t nvec) {
  if (nvec <= kRmsNormSmallRowVectors) return 32;
  const int64_t threads = (nvec + 31) / 32 * 32;
  return threads < kRmsNormMaxThreadsPerRow ? static_cast<int>(threads) : kRmsNormMaxThreadsPerRow;
}

__device__ __forceinline__ float RmsNormWarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Adds the squares of one vector's fp32 values to sum_sq, in element order.
template <int N>
__device__ __forceinline__ void AddSquares(const float (&s)[N], float& sum_sq) {
#pragma unroll
  for (int j = 0; j < N; ++j) sum_sq += s[j] * s[j];
}

// The fp32 row staged in shared memory, vector-major (element j of vector v
// at j * nvec + v): no bank conflicts.
template <int N>
__device__ __forceinline__ void StageVector(float* s_row, int nvec, int v, const float (&s)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) s_row[j * nvec + v] = s[j];
}

template <int N>
__device__ __forceinline__ void UnstageVector(const float* s_row, int nvec, int v, float (&s)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) s[j] = s_row[j * nvec + v];
}

// 1 / sqrt(mean(s²) + eps) of row threadIdx.y from each thread's sum_sq.
// Every thread of the block calls it (it synchronises the block twice);
// blockDim.x (a multiple of 32) threads per row. warp_sums: shared memory of
// blockDim.y * blockDim.x / 32 floats; inv_rms: shared, blockDim.y floats.
__device__ __forceinline__ float RowInvRms(float sum_sq, int hidden, float eps, float* warp_sums, float* inv_rms) {
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  sum_sq = RmsNormWarpSum(sum_sq);
  const int warps_per_row = blockDim.x / 32;
  if (tx % 32 == 0) warp_sums[ty * warps_per_row + tx / 32] = sum_sq;
  __syncthreads();
  if (tx == 0) {
    float total = 0.f;
    for (int w = 0; w < warps_per_row; ++w) total += warp_sums[ty * warps_per_row + w];
    inv_rms[ty] = 1.0f / sqrtf(total / static_cast<float>(hidden) + eps);
  }
  __syncthreads();
  return inv_rms[ty];
}

// out = s * inv * w, element by element, in fp32 (rounded by the caller).
template <int N>
__device__ __forceinline__ void NormalizeVector(const float (&s)[N], float inv, const float (&w)[N], float (&o)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) o[j] = s[j] * inv * w[j];
}

}  // namespace seam::kernels::cuda

// The last step of the GEMV kernels (matmul.cu's, and moe_experts.cu's per
// expert), internal to kernels/cuda: each of a warp's R features × M rows of
// per-lane fp32 partial sums is summed over the warp by shuffles, and lane
// r·M + m writes feature + r of row m, rounded once, to
// out[out_row[m] · n + feature + r]; features at or past n are not written.
#pragma once

#include <cstdint>

#include "cuda_common.cuh"

namespace seam::kernels::cuda {

template <typename O, int M, int R>
__device__ __forceinline__ void WarpSumAndStore(float (&acc)[R][M], const int64_t (&out_row)[M], int64_t feature,
                                                int64_t n, int lane, O* __restrict__ out) {
  static_assert(R * M <= 32, "one lane writes each (feature, row) output");
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[r][m] = v;
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (feature + r >= n) continue;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (lane == r * M + m) out[out_row[m] * n + feature + r] = FromFloat<O>(acc[r][m]);
    }
  }
}

}  // namespace seam::kernels::cuda

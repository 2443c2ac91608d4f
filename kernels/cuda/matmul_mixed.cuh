// Matmul's kernel for x and w of different dtypes at up to kMixedMaxRows
// rows (matmul_mixed.cu); internal to kernels/cuda, chosen by matmul.cu.
// cuBLASLt multiplies operands of one dtype only; a 16-bit activation times
// an f32 weight (LongCat-Flash's fp32 router) otherwise took the tiled
// fallback kernel, whose few blocks walk K one 16-wide tile at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels::cuda {

// Above this M the tiled fallback has enough 16x16 output tiles to fill the
// GPU, and its tiles reuse each load 16 times; this kernel reuses a weight
// load over 8 rows and an x load over 4 features.
constexpr int64_t kMixedMaxRows = 512;

// The kernel's conditions: x and w of different floating dtypes, M ≤
// kMixedMaxRows, K a multiple of 4, x and w aligned to 4 of their elements.
bool MixedEligible(const Tensor& x, const Tensor& w, int64_t m, int64_t k);

// out[M, N] = x · wᵀ (fp32 sums, rounded once to out's dtype) for an
// eligible problem; launches on `stream`.
absl::Status LaunchMixed(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream);

}  // namespace seam::kernels::cuda

// The GEMV kernel of Matmul for decode-sized M (matmul_gemv.cu); internal to
// kernels/cuda. matmul.cu decides when it runs: always up to
// kGemvAnyWeightRows rows, by timing against cuBLASLt above that, by
// GemvByRule where nothing is timed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels::cuda {

constexpr int kGemvMaxRows = 8;        // largest M the GEMV takes
constexpr int kGemvAnyWeightRows = 2;  // up to this M the GEMV takes every eligible problem

// The kernel's conditions: M ≤ kGemvMaxRows, x and w of one floating dtype,
// K a multiple of the 16-byte vector width, x and w 16-byte aligned.
bool GemvEligible(const Tensor& x, const Tensor& w, int64_t m, int64_t k);

// The measured static rule (matmul_gemv.cu's header): eligible, and for M
// above kGemvAnyWeightRows a weight under 16 MiB and, for N > 16384, M ≤ 4.
bool GemvByRule(const Tensor& x, const Tensor& w, int64_t m, int64_t n, int64_t k);

// out[M, N] = x · wᵀ for an eligible problem; launches on `stream`.
absl::Status LaunchGemv(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream);

}  // namespace seam::kernels::cuda

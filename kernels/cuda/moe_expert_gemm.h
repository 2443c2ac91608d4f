// The two CUDA kernels behind ExpertGateUpSilu and ExpertDown
// (seam/kernels/moe_experts.h), internal to kernels/cuda: one argument
// block, launched by moe_fused_experts.cu after it has checked dtypes,
// shapes and alignment.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "seam/core/dtype.h"

namespace seam::kernels::cuda {

struct ExpertGemmArgs {
  // gate-up: x [M, K], pair order[i]'s row order[i] / per_row; down: the
  // activations [P, K] in group order (row i for group position i).
  const void* x = nullptr;
  const void* w = nullptr;  // [E, weight_rows, K]
  // gate-up: act [P, out_cols] in group order; down: [P, out_cols] in pair order.
  void* out = nullptr;
  const int32_t* offsets = nullptr;      // ExpertGroups
  const int32_t* order = nullptr;
  const int32_t* active = nullptr;
  const int32_t* tile_starts = nullptr;
  int64_t weight_rows = 0;  // gate-up: 2 · out_cols (gate rows, then up rows); down: out_cols
  int64_t k = 0;
  int64_t out_cols = 0;
  int64_t pairs = 0;    // P
  int64_t experts = 0;  // E
  int per_row = 1;      // gate-up: G = P / M
  bool gate_up = false;
};

// The decode GEMV (moe_expert_gemv.cu): needs 16-byte aligned x and w and K
// · sizeof(dtype) a multiple of 16.
absl::Status LaunchExpertGemv(DType dtype, const ExpertGemmArgs& args, cudaStream_t stream);
// The tensor-core grouped GEMM (moe_expert_mma.cu): bf16 / f16, 16-byte
// aligned x and w, K a multiple of 8.
absl::Status LaunchExpertMma(DType dtype, const ExpertGemmArgs& args, cudaStream_t stream);

}  // namespace seam::kernels::cuda

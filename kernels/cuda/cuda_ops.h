// CUDA launchers behind the ops of seam/kernels/ops.h (internal to kernels/).
// Same contracts as the public ops; arguments are already validated by the
// dispatcher (shapes, dtypes, all tensors on one CUDA device, contiguous).
// Each launches on kernels::CurrentStream() and returns the launch status.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels::cuda {

absl::Status Embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, const Tensor& out);
absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
absl::Status FusedAddRmsNorm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps,
                             const Tensor& out);
absl::Status SiluAndMul(const Tensor& input, const Tensor& out);
absl::Status RotaryEmbedding(const Tensor& q, const Tensor& k, const Tensor& positions, float theta,
                             int64_t rotary_dim);
absl::Status AddInPlace(const Tensor& dst, const Tensor& src);

}  // namespace seam::kernels::cuda

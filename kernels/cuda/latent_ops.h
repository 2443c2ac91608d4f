// CUDA launchers of seam/kernels/latent_attention.h (internal to kernels/),
// beside cuda_ops.h's: same contracts, arguments already validated by the
// dispatcher (src/ops_latent_attention.cc).
#pragma once

#include "absl/status/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/latent_attention.h"

namespace seam::kernels::cuda {

absl::Status WriteLatentCache(const Tensor& latent, const Tensor& slot_mapping, const Tensor& latent_cache);
absl::Status PagedLatentAttention(const Tensor& q, const Tensor& latent_cache, const AttentionBatch& batch,
                                  float scale, const Tensor& out);

}  // namespace seam::kernels::cuda

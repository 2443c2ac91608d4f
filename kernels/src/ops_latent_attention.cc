// The latent-attention ops of seam/kernels/latent_attention.h: validation of
// the latent cache, the batch and the heads, then dispatch by device. Checks
// that need index values (slots, block ids, query starts) run in the
// implementation.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/latent_attention.h"
#include "src/dispatch.h"
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
#include "cuda/latent_ops.h"
#endif

namespace seam::kernels {

using internal::CommonDevice;
using internal::ExpectAttentionBatch;
using internal::ExpectFloatTensor;
using internal::ExpectIndexTensor;

namespace {

// latent_cache: [num_blocks, block_size, row] with block_size, row > 0.
absl::Status ExpectLatentCache(const Tensor& latent_cache) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(latent_cache, "latent_cache"));
  SEAM_RETURN_IF_ERROR(ExpectRank(latent_cache, 3, "latent_cache"));
  if (latent_cache.dim(1) <= 0 || latent_cache.dim(2) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "latent_cache: block_size and row width must be positive, got shape ", ShapeToString(latent_cache.shape())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteLatentCache(const Tensor& latent, const Tensor& slot_mapping, const Tensor& latent_cache) {
  SEAM_RETURN_IF_ERROR(ExpectLatentCache(latent_cache));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(latent, "latent"));
  SEAM_RETURN_IF_ERROR(ExpectRank(latent, 2, "latent"));
  SEAM_RETURN_IF_ERROR(ExpectShape(latent, {latent.dim(0), latent_cache.dim(2)}, "latent"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(slot_mapping, "slot_mapping"));
  SEAM_RETURN_IF_ERROR(ExpectShape(slot_mapping, {latent.dim(0)}, "slot_mapping"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&latent, "latent"}, {&slot_mapping, "slot_mapping"},
                                                     {&latent_cache, "latent_cache"}}));
  SEAM_KERNELS_DISPATCH(device, WriteLatentCache, latent, slot_mapping, latent_cache);
}

absl::Status PagedLatentAttention(const Tensor& q, const Tensor& latent_cache, const AttentionBatch& batch,
                                  float scale, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectLatentCache(latent_cache));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(q, "q"));
  SEAM_RETURN_IF_ERROR(ExpectRank(q, 3, "q"));
  SEAM_RETURN_IF_ERROR(ExpectShape(q, {q.dim(0), q.dim(1), latent_cache.dim(2)}, "q"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectRank(out, 3, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {q.dim(0), q.dim(1), out.dim(2)}, "out"));
  if (out.dim(2) <= 0 || out.dim(2) > latent_cache.dim(2)) {
    return absl::InvalidArgumentError(absl::StrCat("out: Dc = ", out.dim(2), " must lie in [1, ", latent_cache.dim(2),
                                                   "] (the latent cache's row width)"));
  }
  if (out.dtype() != q.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("out: expected q's dtype ", DTypeName(q.dtype()), ", got ",
                                                   DTypeName(out.dtype())));
  }
  SEAM_RETURN_IF_ERROR(ExpectAttentionBatch(batch));
  if (!std::isfinite(scale)) return absl::InvalidArgumentError(absl::StrCat("scale: expected finite, got ", scale));
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&q, "q"}, {&latent_cache, "latent_cache"},
                                      {&batch.query_start, "query_start"}, {&batch.context_lens, "context_lens"},
                                      {&batch.block_tables, "block_tables"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, PagedLatentAttention, q, latent_cache, batch, scale, out);
}

}  // namespace seam::kernels

// The paged-attention ops of seam/kernels/ops.h: validation of the cache,
// the batch description and the heads, then dispatch by device. Checks that
// need index values (slots, block ids, query starts) run in the implementation.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/dispatch.h"

namespace seam::kernels {

using internal::CommonDevice;
using internal::ExpectAttentionBatch;
using internal::ExpectDimSize;
using internal::ExpectFloatTensor;
using internal::ExpectIndexTensor;

namespace {

// k_cache: [num_blocks, block_size, Hk, D]; v_cache the same shape.
absl::Status ExpectCaches(const Tensor& k_cache, const Tensor& v_cache) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(k_cache, "k_cache"));
  SEAM_RETURN_IF_ERROR(ExpectRank(k_cache, 4, "k_cache"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(v_cache, "v_cache"));
  SEAM_RETURN_IF_ERROR(ExpectShape(v_cache, k_cache.shape(), "v_cache"));
  if (k_cache.dim(1) <= 0 || k_cache.dim(2) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("k_cache: block_size and kv heads must be positive, got shape ",
                                                   ShapeToString(k_cache.shape())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status QkvNormRopeCache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, float theta, const Tensor& slot_mapping,
                              const Tensor& k_cache, const Tensor& v_cache, const Tensor& q_out) {
  SEAM_RETURN_IF_ERROR(ExpectCaches(k_cache, v_cache));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(q_out, "q_out"));
  SEAM_RETURN_IF_ERROR(ExpectRank(q_out, 3, "q_out"));
  const int64_t t = q_out.dim(0), hq = q_out.dim(1), d = q_out.dim(2), hk = k_cache.dim(2);
  SEAM_RETURN_IF_ERROR(ExpectDimSize(k_cache, 3, d, "k_cache"));
  if (d % 2 != 0) return absl::InvalidArgumentError(absl::StrCat("q_out: head_dim must be even, got ", d));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(qkv, "qkv"));
  SEAM_RETURN_IF_ERROR(ExpectShape(qkv, {t, (hq + 2 * hk) * d}, "qkv"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(q_norm, "q_norm"));
  SEAM_RETURN_IF_ERROR(ExpectShape(q_norm, {d}, "q_norm"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(k_norm, "k_norm"));
  SEAM_RETURN_IF_ERROR(ExpectShape(k_norm, {d}, "k_norm"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(positions, "positions"));
  SEAM_RETURN_IF_ERROR(ExpectShape(positions, {t}, "positions"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(slot_mapping, "slot_mapping"));
  SEAM_RETURN_IF_ERROR(ExpectShape(slot_mapping, {t}, "slot_mapping"));
  if (!std::isfinite(eps) || eps < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat("eps: expected a finite value >= 0, got ", eps));
  }
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&qkv, "qkv"}, {&q_norm, "q_norm"}, {&k_norm, "k_norm"},
                                      {&positions, "positions"}, {&slot_mapping, "slot_mapping"},
                                      {&k_cache, "k_cache"}, {&v_cache, "v_cache"}, {&q_out, "q_out"}}));
  SEAM_KERNELS_DISPATCH(device, QkvNormRopeCache, qkv, q_norm, k_norm, eps, positions, theta, slot_mapping,
                        k_cache, v_cache, q_out);
}

absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache) {
  SEAM_RETURN_IF_ERROR(ExpectCaches(k_cache, v_cache));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(k, "k"));
  SEAM_RETURN_IF_ERROR(ExpectRank(k, 3, "k"));
  SEAM_RETURN_IF_ERROR(ExpectShape(k, {k.dim(0), k_cache.dim(2), k_cache.dim(3)}, "k"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(v, "v"));
  SEAM_RETURN_IF_ERROR(ExpectShape(v, k.shape(), "v"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(slot_mapping, "slot_mapping"));
  SEAM_RETURN_IF_ERROR(ExpectShape(slot_mapping, {k.dim(0)}, "slot_mapping"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&k, "k"}, {&v, "v"}, {&slot_mapping, "slot_mapping"},
                                                     {&k_cache, "k_cache"}, {&v_cache, "v_cache"}}));
  SEAM_KERNELS_DISPATCH(device, WriteKvCache, k, v, slot_mapping, k_cache, v_cache);
}

absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectCaches(k_cache, v_cache));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(q, "q"));
  SEAM_RETURN_IF_ERROR(ExpectRank(q, 3, "q"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(q, 2, k_cache.dim(3), "q"));
  const int64_t hq = q.dim(1), hk = k_cache.dim(2);
  if (hq % hk != 0) {
    return absl::InvalidArgumentError(absl::StrCat("q: ", hq, " query heads are not a multiple of the cache's ", hk,
                                                   " kv heads"));
  }
  SEAM_RETURN_IF_ERROR(ExpectAttentionBatch(batch));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, q.shape(), "out"));
  if (!std::isfinite(scale)) return absl::InvalidArgumentError(absl::StrCat("scale: expected finite, got ", scale));
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&q, "q"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"},
                                      {&batch.query_start, "query_start"}, {&batch.context_lens, "context_lens"},
                                      {&batch.block_tables, "block_tables"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, PagedAttention, q, k_cache, v_cache, batch, scale, out);
}

}  // namespace seam::kernels

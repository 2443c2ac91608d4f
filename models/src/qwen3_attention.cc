// Qwen3 attention on one attention-TP rank: one projection for this rank's
// q, k and v heads (their weight rows side by side), per-head RMSNorm of q
// and k with the rotary embedding and the cache write fused
// (QkvNormRopeCache), paged attention, and an o_proj that returns its
// partial sum unreduced.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/boundary/context_parallel.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/qwen3_layers.h"

namespace seam::models {

absl::StatusOr<AttentionShard> AttentionShard::Of(const weights::ModelConfig& config, int attn_tp,
                                                  int attn_tp_rank) {
  const int64_t heads = config.num_attention_heads, kv = config.num_key_value_heads;
  if (attn_tp <= 0 || heads % attn_tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_attention_heads (", heads, ") does not divide over attention TP ", attn_tp));
  }
  if (kv <= 0 || heads % kv != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_attention_heads (", heads, ") is not a multiple of num_key_value_heads (", kv, ")"));
  }
  AttentionShard s;
  s.q_heads = heads / attn_tp;
  if (kv % attn_tp == 0) {  // KV heads split like the query heads
    s.kv_heads = kv / attn_tp;
    s.kv_part = attn_tp_rank;
    s.kv_parts = attn_tp;
  } else if (attn_tp % kv == 0) {  // fewer KV heads than ranks: each rank holds a replica of one
    s.kv_heads = 1;
    s.kv_part = attn_tp_rank / static_cast<int>(attn_tp / kv);
    s.kv_parts = static_cast<int>(kv);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("num_key_value_heads (", kv,
                                                   ") neither divides over nor divides attention TP ", attn_tp));
  }
  return s;
}

namespace internal {

absl::StatusOr<Attention> Attention::Load(const LoadContext& ctx, int64_t layer) {
  const weights::ModelConfig& c = ctx.config;
  const int64_t d = c.head_dim;
  Attention attn;
  attn.q_heads_ = ctx.shard.q_heads;
  attn.kv_heads_ = ctx.shard.kv_heads;
  attn.head_dim_ = d;
  attn.hidden_ = c.hidden_size;
  attn.eps_ = c.rms_norm_eps;
  attn.theta_ = c.rope_theta;
  const std::string projections[4] = {
      LayerName(layer, "self_attn.q_proj.weight"), LayerName(layer, "self_attn.k_proj.weight"),
      LayerName(layer, "self_attn.v_proj.weight"), LayerName(layer, "self_attn.o_proj.weight")};
  SEAM_ASSIGN_OR_RETURN(AttentionWeights w, LoadAttentionWeights(ctx, projections));
  SEAM_ASSIGN_OR_RETURN(attn.wqkv_, ctx.Place(ConcatRows(ConcatRows(w.wq, w.wk), w.wv)));
  SEAM_ASSIGN_OR_RETURN(attn.wo_, ctx.Place(w.wo));
  SEAM_ASSIGN_OR_RETURN(attn.q_norm_, ctx.Load(LayerName(layer, "self_attn.q_norm.weight"), {d}));
  SEAM_ASSIGN_OR_RETURN(attn.k_norm_, ctx.Load(LayerName(layer, "self_attn.k_norm.weight"), {d}));
  return attn;
}

absl::StatusOr<Tensor> Attention::Forward(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                          int64_t cache_layer) const {
  const int64_t t = x.rows(), d = head_dim_;
  const DType dt = x.dtype();
  const Device dev = x.device();
  if (step.positions.dim(0) != t) {
    return absl::InternalError(absl::StrCat("attention input has ", t, " rows but the step has ",
                                            step.positions.dim(0), " tokens"));
  }
  // One projection for q, k and v; then per-head norms, RoPE and the cache
  // write in one pass.
  Tensor qkv = Tensor::Empty({t, (q_heads_ + 2 * kv_heads_) * d}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wqkv_, qkv));
  Tensor q3 = Tensor::Empty({t, q_heads_, d}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::QkvNormRopeCache(qkv, q_norm_, k_norm_, eps_, step.positions, theta_,
                                                 step.slot_mapping, cache.k(cache_layer), cache.v(cache_layer), q3));

  Tensor attn = Tensor::Empty({t, q_heads_, d}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::PagedAttention(q3, cache.k(cache_layer), cache.v(cache_layer), step.attention,
                                               1.0f / std::sqrt(static_cast<float>(d)), attn));
  SEAM_ASSIGN_OR_RETURN(Tensor attn_rows, attn.Reshape({t, q_heads_ * d}));
  Tensor out = Tensor::Empty({t, hidden_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(attn_rows, wo_, out));  // partial over attention TP: never reduced here
  return out;
}

absl::StatusOr<Tensor> Attention::ForwardContextParallel(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                                         int64_t cache_layer, boundary::ForwardBatch& batch,
                                                         const CpAttention& cp) const {
  const int64_t t = x.rows(), d = head_dim_, total = step.positions.dim(0);
  const DType dt = x.dtype();
  const Device dev = x.device();
  Tensor qkv = Tensor::Empty({t, (q_heads_ + 2 * kv_heads_) * d}, dt, dev);
  if (t > 0) SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wqkv_, qkv));
  SEAM_ASSIGN_OR_RETURN(Tensor all, boundary::GatherContext(qkv, batch));
  if (all.rows() != total) {
    return absl::InternalError(absl::StrCat("the gathered context has ", all.rows(), " rows but the step has ",
                                            total, " tokens"));
  }
  // Every row's k and v into this rank's cache (decode then runs on it as on
  // one rank), and q of every row, of which this rank keeps its own.
  Tensor q_all = Tensor::Empty({total, q_heads_, d}, dt, dev);
  if (total > 0) {
    SEAM_RETURN_IF_ERROR(kernels::QkvNormRopeCache(all, q_norm_, k_norm_, eps_, step.positions, theta_,
                                                   step.slot_mapping, cache.k(cache_layer), cache.v(cache_layer),
                                                   q_all));
  }
  Tensor out = Tensor::Empty({t, hidden_}, dt, dev);
  if (t == 0) return out;
  SEAM_ASSIGN_OR_RETURN(Tensor q3, boundary::TakeRowsByIndex(q_all, cp.rows));
  Tensor attn = Tensor::Empty({t, q_heads_, d}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::PagedAttention(q3, cache.k(cache_layer), cache.v(cache_layer), cp.attention,
                                               1.0f / std::sqrt(static_cast<float>(d)), attn));
  SEAM_ASSIGN_OR_RETURN(Tensor attn_rows, attn.Reshape({t, q_heads_ * d}));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(attn_rows, wo_, out));  // partial over attention TP
  return out;
}

}  // namespace internal
}  // namespace seam::models

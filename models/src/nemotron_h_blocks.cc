// Nemotron-H's attention (GQA over the paged KV cache, no rotary embedding,
// no q/k norms) and squared-ReLU MLP on one rank; both return partial sums.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/nemotron_h_layers.h"

namespace seam::models::internal {

absl::StatusOr<PlainAttention> PlainAttention::Load(const LoadContext& ctx, const NemotronHNames& names,
                                                    int64_t layer) {
  PlainAttention attn;
  attn.q_heads_ = ctx.shard.q_heads;
  attn.kv_heads_ = ctx.shard.kv_heads;
  attn.head_dim_ = ctx.config.head_dim;
  attn.hidden_ = ctx.config.hidden_size;
  const std::string projections[4] = {
      names.Layer(layer, "mixer.q_proj.weight"), names.Layer(layer, "mixer.k_proj.weight"),
      names.Layer(layer, "mixer.v_proj.weight"), names.Layer(layer, "mixer.o_proj.weight")};
  SEAM_ASSIGN_OR_RETURN(AttentionWeights w, LoadAttentionWeights(ctx, projections));
  SEAM_ASSIGN_OR_RETURN(attn.wq_, ctx.Place(w.wq));
  SEAM_ASSIGN_OR_RETURN(attn.wk_, ctx.Place(w.wk));
  SEAM_ASSIGN_OR_RETURN(attn.wv_, ctx.Place(w.wv));
  SEAM_ASSIGN_OR_RETURN(attn.wo_, ctx.Place(w.wo));
  return attn;
}

absl::StatusOr<Tensor> PlainAttention::Forward(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                               int64_t cache_layer) const {
  const int64_t t = x.rows(), d = head_dim_;
  const DType dt = x.dtype();
  const Device dev = x.device();
  Tensor q = Tensor::Empty({t, q_heads_ * d}, dt, dev);
  Tensor k = Tensor::Empty({t, kv_heads_ * d}, dt, dev), v = Tensor::Empty({t, kv_heads_ * d}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wq_, q));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wk_, k));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wv_, v));
  SEAM_ASSIGN_OR_RETURN(Tensor q3, q.Reshape({t, q_heads_, d}));
  SEAM_ASSIGN_OR_RETURN(Tensor k3, k.Reshape({t, kv_heads_, d}));
  SEAM_ASSIGN_OR_RETURN(Tensor v3, v.Reshape({t, kv_heads_, d}));
  SEAM_RETURN_IF_ERROR(
      kernels::WriteKvCache(k3, v3, step.slot_mapping, cache.k(cache_layer), cache.v(cache_layer)));
  Tensor attn = Tensor::Empty({t, q_heads_, d}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::PagedAttention(q3, cache.k(cache_layer), cache.v(cache_layer), step.attention,
                                               1.0f / std::sqrt(static_cast<float>(d)), attn));
  SEAM_ASSIGN_OR_RETURN(Tensor rows, attn.Reshape({t, q_heads_ * d}));
  Tensor out = Tensor::Empty({t, hidden_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(rows, wo_, out));  // partial over attention TP
  return out;
}

absl::StatusOr<Relu2Mlp> Relu2Mlp::Load(const LoadContext& ctx, const NemotronHNames& names, int64_t layer) {
  const int64_t h = ctx.config.hidden_size, inter = ctx.config.intermediate_size;
  const int r = ctx.options.topology.tp_rank, tp = ctx.options.topology.tp;
  if (inter % tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, ": intermediate_size ", inter, " does not divide over TP ", tp));
  }
  Relu2Mlp mlp;
  SEAM_ASSIGN_OR_RETURN(mlp.up_, ctx.LoadRows(names.Layer(layer, "mixer.up_proj.weight"), {inter, h}, r, tp));
  SEAM_ASSIGN_OR_RETURN(mlp.down_, ctx.LoadCols(names.Layer(layer, "mixer.down_proj.weight"), {h, inter}, r, tp));
  return mlp;
}

absl::StatusOr<Tensor> Relu2Mlp::Forward(const Tensor& x) const {
  const int64_t n = x.rows(), inner = up_.dim(0);
  Tensor out = Tensor::Empty({n, down_.dim(0)}, x.dtype(), x.device());
  if (n == 0) return out;
  Tensor up = Tensor::Empty({n, inner}, x.dtype(), x.device());
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, up_, up));
  SEAM_RETURN_IF_ERROR(kernels::ReluSquared(up, up));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(up, down_, out));  // partial over TP
  return out;
}

}  // namespace seam::models::internal

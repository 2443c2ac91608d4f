// LoadContext's loads (read on the host, placed on the rank's device) and
// the row helper.
#include "src/load_context.h"

#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/weights/output_head.h"

namespace seam::models::internal {

absl::StatusOr<Tensor> LoadContext::Place(const Tensor& host) const { return host.On(options.device); }

absl::StatusOr<Tensor> LoadContext::Load(const std::string& name, const Shape& shape) const {
  SEAM_ASSIGN_OR_RETURN(Tensor t, checkpoint.Load(name, shape, options.dtype));
  return Place(t);
}

absl::StatusOr<Tensor> LoadContext::LoadRows(const std::string& name, const Shape& shape, int part, int parts) const {
  SEAM_ASSIGN_OR_RETURN(Tensor t, checkpoint.LoadRows(name, shape, part, parts, options.dtype));
  return Place(t);
}

absl::StatusOr<Tensor> LoadContext::LoadCols(const std::string& name, const Shape& shape, int part, int parts) const {
  SEAM_ASSIGN_OR_RETURN(Tensor t, checkpoint.LoadCols(name, shape, part, parts, options.dtype));
  return Place(t);
}

absl::StatusOr<AttentionWeights> LoadAttentionWeights(const LoadContext& ctx, const std::string (&names)[4]) {
  const weights::ModelConfig& c = ctx.config;
  const int64_t d = c.head_dim, h = c.hidden_size, heads = c.num_attention_heads, kv = c.num_key_value_heads;
  const int a = ctx.options.topology.attn_tp_rank(), atp = ctx.options.topology.attn_tp();
  const weights::Checkpoint& ck = ctx.checkpoint;
  const DType dt = ctx.options.dtype;
  AttentionWeights w;
  SEAM_ASSIGN_OR_RETURN(w.wq, ck.LoadRows(names[0], {heads * d, h}, a, atp, dt));
  SEAM_ASSIGN_OR_RETURN(w.wk, ck.LoadRows(names[1], {kv * d, h}, ctx.shard.kv_part, ctx.shard.kv_parts, dt));
  SEAM_ASSIGN_OR_RETURN(w.wv, ck.LoadRows(names[2], {kv * d, h}, ctx.shard.kv_part, ctx.shard.kv_parts, dt));
  SEAM_ASSIGN_OR_RETURN(w.wo, ck.LoadCols(names[3], {h, heads * d}, a, atp, dt));
  return w;
}

Tensor ConcatRows(const Tensor& a, const Tensor& b) {
  SEAM_CHECK(a.rank() == 2 && b.rank() == 2 && a.dim(1) == b.dim(1) && a.dtype() == b.dtype());
  Tensor out = Tensor::Empty({a.rows() + b.rows(), a.dim(1)}, a.dtype(), a.device());
  SEAM_CHECK_OK(CopyInto(a, out.Rows(0, a.rows())));
  SEAM_CHECK_OK(CopyInto(b, out.Rows(a.rows(), b.rows())));
  return out;
}

}  // namespace seam::models::internal

// The Qwen3-MoE sparse block on one TP rank: a replicated router (fp32
// softmax, top-k, optional renormalisation as Hugging Face does: MoeRoute)
// and every expert's intermediate slice. Routed rows are gathered per expert
// (GatherRows), run through the expert's shard, scaled by their routing
// weight and added back (ScatterAddRows, in expert order); the result is this
// rank's partial sum of the MoE output. The same code runs on host and CUDA
// tensors: only the routed ids come to the host to build the row lists.
#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/qwen3_layers.h"

namespace seam::models::internal {

absl::StatusOr<MoeBlock> MoeBlock::Load(const LoadContext& ctx, int64_t layer) {
  const weights::ModelConfig& c = ctx.config;
  if (c.num_experts <= 0 || c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ": num_experts_per_tok (",
                                                   c.num_experts_per_tok, ") must be in [1, num_experts (",
                                                   c.num_experts, ")]"));
  }
  MoeBlock moe;
  moe.top_k_ = c.num_experts_per_tok;
  moe.norm_topk_prob_ = c.norm_topk_prob;
  SEAM_ASSIGN_OR_RETURN(moe.router_, ctx.Load(LayerName(layer, "mlp.gate.weight"), {c.num_experts, c.hidden_size}));
  moe.experts_.reserve(c.num_experts);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    SEAM_ASSIGN_OR_RETURN(DenseMlp expert,
                          DenseMlp::Load(ctx, LayerName(layer, absl::StrCat("mlp.experts.", e)),
                                         c.moe_intermediate_size));
    moe.experts_.push_back(std::move(expert));
  }
  return moe;
}

absl::StatusOr<Tensor> MoeBlock::Forward(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), h = x.dim(1), experts = router_.dim(0);
  Tensor out = Tensor::Zeros({n, h}, x.dtype(), dev);
  if (n == 0) return out;

  Tensor logits = Tensor::Empty({n, experts}, DType::kF32, dev);
  Tensor top_w = Tensor::Empty({n, top_k_}, DType::kF32, dev);
  Tensor top_e = Tensor::Empty({n, top_k_}, DType::kI32, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
  SEAM_RETURN_IF_ERROR(kernels::MoeRoute(logits, top_k_, norm_topk_prob_, top_w, top_e));
  SEAM_ASSIGN_OR_RETURN(Tensor host_w, top_w.On(Device::CPU()));
  SEAM_ASSIGN_OR_RETURN(Tensor host_e, top_e.On(Device::CPU()));
  const float* w = host_w.data<float>();
  const int32_t* ids = host_e.data<int32_t>();
  // Rows routed to each expert with their weights, in row order.
  std::vector<std::vector<int32_t>> rows_of(experts);
  std::vector<std::vector<float>> weight_of(experts);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < top_k_; ++j) {
      rows_of[ids[r * top_k_ + j]].push_back(static_cast<int32_t>(r));
      weight_of[ids[r * top_k_ + j]].push_back(w[r * top_k_ + j]);
    }
  }
  for (int64_t e = 0; e < experts; ++e) {
    if (rows_of[e].empty()) continue;
    const int64_t m = static_cast<int64_t>(rows_of[e].size());
    SEAM_ASSIGN_OR_RETURN(Tensor routed, GatherRows(x, rows_of[e]));
    SEAM_ASSIGN_OR_RETURN(Tensor y, experts_[e].Forward(routed));
    SEAM_ASSIGN_OR_RETURN(Tensor rows, Tensor::FromInts(rows_of[e], {m}).On(dev));
    SEAM_ASSIGN_OR_RETURN(Tensor weights, Tensor::FromFloats(weight_of[e], {m}).On(dev));
    SEAM_RETURN_IF_ERROR(kernels::ScatterAddRows(out, y, rows, weights));
  }
  return out;  // partial over TP: never reduced here
}

}  // namespace seam::models::internal

// The Qwen3-MoE sparse block on one TP rank: a replicated router (fp32
// softmax, top-k, optional renormalisation as Hugging Face does: MoeRoute)
// and every expert's intermediate slice, stacked [E, ...]. The routes run
// through RoutedExperts (routed_experts.h: sorted by expert id, grouped by
// expert on the tensors' device, then fused, grouped or one by one as
// ModelOptions::moe_experts and the batch's size choose). Each row's expert
// outputs are summed in ascending expert order in fp32 (MoeFinalize, or
// fused into the final norm: ForwardDeferred), and the result is this rank's
// partial sum of the MoE output.
#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/moe_experts.h"
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
  SEAM_ASSIGN_OR_RETURN(moe.experts_, RoutedExperts::Load(ctx, c.num_experts, moe.top_k_, [&](int64_t e) {
    return DenseMlp::LoadHost(ctx, LayerName(layer, absl::StrCat("mlp.experts.", e)), c.moe_intermediate_size);
  }));
  return moe;
}

int64_t MoeBlock::grouped_max_rows() const { return experts_.grouped_max_rows(); }

absl::StatusOr<ExpertSlots> MoeBlock::Run(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), k = top_k_;
  Tensor scales = Tensor::Empty({n, k}, DType::kF32, dev), ids = Tensor::Empty({n, k}, DType::kI32, dev);
  if (n != 0) {
    Tensor logits = Tensor::Empty({n, router_.dim(0)}, DType::kF32, dev);
    SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
    SEAM_RETURN_IF_ERROR(kernels::MoeRoute(logits, k, norm_topk_prob_, scales, ids));
  }
  return experts_.Run(x, scales, ids);
}

absl::StatusOr<Tensor> MoeBlock::Forward(const Tensor& x) const {
  SEAM_ASSIGN_OR_RETURN(ExpertSlots s, Run(x));
  Tensor out = Tensor::Empty({x.rows(), x.dim(1)}, x.dtype(), x.device());
  SEAM_RETURN_IF_ERROR(kernels::MoeFinalize(s.expert_out, s.scales, out));
  return out;  // partial over TP: never reduced here
}

absl::StatusOr<std::shared_ptr<const boundary::DeferredFinalize>> MoeBlock::ForwardDeferred(const Tensor& x) const {
  SEAM_ASSIGN_OR_RETURN(ExpertSlots s, Run(x));
  auto complete = [s, n = x.rows(), h = x.dim(1), dev = x.device()]() -> absl::StatusOr<Tensor> {
    Tensor out = Tensor::Empty({n, h}, s.expert_out.dtype(), dev);
    SEAM_RETURN_IF_ERROR(kernels::MoeFinalize(s.expert_out, s.scales, out));
    return out;
  };
  return std::make_shared<const boundary::DeferredFinalize>(s.expert_out, s.scales, std::move(complete));
}

}  // namespace seam::models::internal

namespace seam::models {

absl::StatusOr<MoeExperts> ParseMoeExperts(const std::string& text) {
  for (MoeExperts e : {MoeExperts::kAuto, MoeExperts::kFused, MoeExperts::kGrouped, MoeExperts::kPerExpert,
                       MoeExperts::kClassic}) {
    if (text == MoeExpertsName(e)) return e;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown way to run MoE experts '", text,
                                                 "' (expected auto, fused, grouped, per-expert or classic)"));
}

const char* MoeExpertsName(MoeExperts experts) {
  switch (experts) {
    case MoeExperts::kAuto: return "auto";
    case MoeExperts::kFused: return "fused";
    case MoeExperts::kGrouped: return "grouped";
    case MoeExperts::kPerExpert: return "per-expert";
    case MoeExperts::kClassic: return "classic";
  }
  return "?";
}

}  // namespace seam::models

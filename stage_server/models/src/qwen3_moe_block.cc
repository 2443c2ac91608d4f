// The Qwen3-MoE sparse block on one TP rank: a replicated router (fp32
// softmax, top-k, optional renormalisation as Hugging Face does) and every
// expert's intermediate slice. Routed rows are gathered per expert, run
// through the expert's shard, scaled by their routing weight and added back;
// the result is this rank's partial sum of the MoE output.
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
  SEAM_ASSIGN_OR_RETURN(moe.router_,
                        ctx.checkpoint.Load(LayerName(layer, "mlp.gate.weight"), {c.num_experts, c.hidden_size},
                                            ctx.dtype));
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
  if (!x.device().is_cpu()) {
    return absl::UnimplementedError(
        absl::StrCat("MoE routing gathers rows on the host; got a tensor on ", x.device().ToString()));
  }
  const int64_t n = x.rows(), h = x.dim(1), experts = router_.dim(0);
  Tensor out = Tensor::Zeros({n, h}, x.dtype());
  if (n == 0) return out;

  Tensor logits = Tensor::Empty({n, experts}, DType::kF32);
  Tensor probs = Tensor::Empty({n, experts}, DType::kF32);
  Tensor top_w = Tensor::Empty({n, top_k_}, DType::kF32);
  Tensor top_e = Tensor::Empty({n, top_k_}, DType::kI32);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
  SEAM_RETURN_IF_ERROR(kernels::Softmax(logits, probs));
  SEAM_RETURN_IF_ERROR(kernels::TopK(probs, top_k_, top_w, top_e));

  float* w = top_w.data<float>();
  const int32_t* ids = top_e.data<int32_t>();
  if (norm_topk_prob_) {
    for (int64_t r = 0; r < n; ++r) {
      float sum = 0.0f;
      for (int64_t j = 0; j < top_k_; ++j) sum += w[r * top_k_ + j];
      for (int64_t j = 0; j < top_k_; ++j) w[r * top_k_ + j] /= sum;
    }
  }
  // Rows routed to each expert with their weights, in row order.
  std::vector<std::vector<int64_t>> rows_of(experts);
  std::vector<std::vector<float>> weight_of(experts);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < top_k_; ++j) {
      rows_of[ids[r * top_k_ + j]].push_back(r);
      weight_of[ids[r * top_k_ + j]].push_back(w[r * top_k_ + j]);
    }
  }
  for (int64_t e = 0; e < experts; ++e) {
    if (rows_of[e].empty()) continue;
    SEAM_ASSIGN_OR_RETURN(Tensor y, experts_[e].Forward(GatherRows(x, rows_of[e])));
    for (size_t i = 0; i < rows_of[e].size(); ++i) {
      const int64_t dst = rows_of[e][i] * h, src = static_cast<int64_t>(i) * h;
      for (int64_t c = 0; c < h; ++c) {
        const float acc = LoadAsFloat(out.raw_data(), out.dtype(), dst + c) +
                          LoadAsFloat(y.raw_data(), y.dtype(), src + c) * weight_of[e][i];
        StoreFromFloat(out.raw_data(), out.dtype(), dst + c, acc);
      }
    }
  }
  return out;  // partial over TP: never reduced here
}

}  // namespace seam::models::internal

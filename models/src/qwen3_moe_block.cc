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

absl::StatusOr<MoeBlock::Routed> MoeBlock::Route(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), experts = router_.dim(0);
  Routed routed;
  routed.rows_of.resize(experts);
  routed.weight_of.resize(experts);
  routed.slot_of.resize(experts);
  Tensor logits = Tensor::Empty({n, experts}, DType::kF32, dev);
  Tensor top_w = Tensor::Empty({n, top_k_}, DType::kF32, dev);
  Tensor top_e = Tensor::Empty({n, top_k_}, DType::kI32, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
  SEAM_RETURN_IF_ERROR(kernels::MoeRoute(logits, top_k_, norm_topk_prob_, top_w, top_e));
  SEAM_ASSIGN_OR_RETURN(Tensor host_w, top_w.On(Device::CPU()));
  SEAM_ASSIGN_OR_RETURN(Tensor host_e, top_e.On(Device::CPU()));
  const float* w = host_w.data<float>();
  const int32_t* ids = host_e.data<int32_t>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < top_k_; ++j) {
      const int32_t e = ids[r * top_k_ + j];
      int32_t slot = 0;  // experts of this row with a smaller id come first
      for (int64_t i = 0; i < top_k_; ++i) slot += ids[r * top_k_ + i] < e;
      routed.rows_of[e].push_back(static_cast<int32_t>(r));
      routed.weight_of[e].push_back(w[r * top_k_ + j]);
      routed.slot_of[e].push_back(slot);
    }
  }
  return routed;
}

absl::StatusOr<Tensor> MoeBlock::Forward(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), h = x.dim(1), experts = router_.dim(0);
  Tensor out = Tensor::Zeros({n, h}, x.dtype(), dev);
  if (n == 0) return out;
  SEAM_ASSIGN_OR_RETURN(Routed routed, Route(x));
  for (int64_t e = 0; e < experts; ++e) {
    if (routed.rows_of[e].empty()) continue;
    const int64_t m = static_cast<int64_t>(routed.rows_of[e].size());
    SEAM_ASSIGN_OR_RETURN(Tensor in, GatherRows(x, routed.rows_of[e]));
    SEAM_ASSIGN_OR_RETURN(Tensor y, experts_[e].Forward(in));
    SEAM_ASSIGN_OR_RETURN(Tensor rows, Tensor::FromInts(routed.rows_of[e], {m}).On(dev));
    SEAM_ASSIGN_OR_RETURN(Tensor weights, Tensor::FromFloats(routed.weight_of[e], {m}).On(dev));
    SEAM_RETURN_IF_ERROR(kernels::ScatterAddRows(out, y, rows, weights));
  }
  return out;  // partial over TP: never reduced here
}

absl::StatusOr<std::shared_ptr<const boundary::DeferredFinalize>> MoeBlock::ForwardDeferred(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), h = x.dim(1), experts = router_.dim(0), k = top_k_;
  // [N·K, H] viewed as [N, K, H]: row r·K + slot holds that slot's expert output.
  Tensor slots = Tensor::Zeros({n * k, h}, x.dtype(), dev);
  std::vector<float> scales(n * k, 0.0f);
  if (n > 0) {
    SEAM_ASSIGN_OR_RETURN(Routed routed, Route(x));
    for (int64_t e = 0; e < experts; ++e) {
      if (routed.rows_of[e].empty()) continue;
      const int64_t m = static_cast<int64_t>(routed.rows_of[e].size());
      std::vector<int32_t> at(m);
      for (int64_t i = 0; i < m; ++i) {
        at[i] = static_cast<int32_t>(routed.rows_of[e][i] * k + routed.slot_of[e][i]);
        scales[at[i]] = routed.weight_of[e][i];
      }
      SEAM_ASSIGN_OR_RETURN(Tensor in, GatherRows(x, routed.rows_of[e]));
      SEAM_ASSIGN_OR_RETURN(Tensor y, experts_[e].Forward(in));
      SEAM_ASSIGN_OR_RETURN(Tensor rows, Tensor::FromInts(at, {m}).On(dev));
      SEAM_ASSIGN_OR_RETURN(Tensor ones, Tensor::FromFloats(std::vector<float>(m, 1.0f), {m}).On(dev));
      SEAM_RETURN_IF_ERROR(kernels::ScatterAddRows(slots, y, rows, ones));  // 0 + 1·y: a copy
    }
  }
  SEAM_ASSIGN_OR_RETURN(Tensor expert_out, slots.Reshape({n, k, h}));
  SEAM_ASSIGN_OR_RETURN(Tensor scale_t, Tensor::FromFloats(scales, {n, k}).On(dev));
  // Forward's finalize: each row adds its experts' weighted outputs in ascending id order.
  auto complete = [slots, scales, n, k, h, dev]() -> absl::StatusOr<Tensor> {
    Tensor out = Tensor::Zeros({n, h}, slots.dtype(), dev);
    if (n == 0) return out;
    std::vector<int32_t> all(n);
    for (int64_t r = 0; r < n; ++r) all[r] = static_cast<int32_t>(r);
    SEAM_ASSIGN_OR_RETURN(Tensor rows, Tensor::FromInts(all, {n}).On(dev));
    for (int64_t slot = 0; slot < k; ++slot) {
      std::vector<int32_t> at(n);
      std::vector<float> w(n);
      for (int64_t r = 0; r < n; ++r) {
        at[r] = static_cast<int32_t>(r * k + slot);
        w[r] = scales[r * k + slot];
      }
      SEAM_ASSIGN_OR_RETURN(Tensor at_t, Tensor::FromInts(at, {n}).On(dev));
      SEAM_ASSIGN_OR_RETURN(Tensor w_t, Tensor::FromFloats(w, {n}).On(dev));
      Tensor y = Tensor::Empty({n, h}, slots.dtype(), dev);
      SEAM_RETURN_IF_ERROR(kernels::GatherRows(slots, at_t, y));
      SEAM_RETURN_IF_ERROR(kernels::ScatterAddRows(out, y, rows, w_t));
    }
    return out;
  };
  return std::make_shared<const boundary::DeferredFinalize>(expert_out, scale_t, std::move(complete));
}

}  // namespace seam::models::internal

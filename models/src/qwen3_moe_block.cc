// The Qwen3-MoE sparse block on one TP rank: a replicated router (fp32
// softmax, top-k, optional renormalisation as Hugging Face does: MoeRoute)
// and every expert's intermediate slice, stacked [E, ...]. Two ways to run
// the experts (ModelOptions::moe_experts):
// - grouped: the routes ordered by expert id, the (row, expert) pairs
//   grouped by expert and every expert's matmul run over its pairs on the
//   tensors' device (seam/kernels/moe_experts.h), then the weighted sum per
//   row (MoeFinalize); nothing comes to the host, so a decode step holding
//   the block can be a CUDA graph;
// - per expert: only the routed ids come to the host to build the row
//   lists; each expert's rows are gathered (GatherRows), run through its
//   shard, scaled by their routing weight and added back (ScatterAddRows,
//   in expert order).
// Either way the result is this rank's partial sum of the MoE output.
#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"
#include "src/qwen3_layers.h"

namespace seam::models::internal {

namespace {

// MoeExperts::kAuto groups a batch's experts on CUDA up to this many routes
// (rows × top-k): decode batches and short prefill chunks. Larger batches
// run per expert, where cuBLASLt's kernels use each expert's weight for
// many rows at once (the grouped GEMV re-reads it every 8 rows).
constexpr int64_t kAutoGroupedPairs = 4096;

// Expert e's [rows, cols] matrix of a stacked [E, rows, cols] weight, as a view.
absl::StatusOr<Tensor> ExpertSlice(const Tensor& stacked, int64_t e) {
  return stacked.Rows(e, 1).Reshape({stacked.dim(1), stacked.dim(2)});
}

}  // namespace

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
  const int64_t experts = c.num_experts;
  for (int64_t e = 0; e < experts; ++e) {
    SEAM_ASSIGN_OR_RETURN(auto host, DenseMlp::LoadHost(ctx, LayerName(layer, absl::StrCat("mlp.experts.", e)),
                                                        c.moe_intermediate_size));
    if (e == 0) {
      SEAM_ASSIGN_OR_RETURN(moe.gate_up_, Tensor::TryEmpty({experts, host.first.dim(0), host.first.dim(1)},
                                                           host.first.dtype(), ctx.device));
      SEAM_ASSIGN_OR_RETURN(moe.down_, Tensor::TryEmpty({experts, host.second.dim(0), host.second.dim(1)},
                                                        host.second.dtype(), ctx.device));
    }
    SEAM_ASSIGN_OR_RETURN(Tensor gate_up, ExpertSlice(moe.gate_up_, e));
    SEAM_ASSIGN_OR_RETURN(Tensor down, ExpertSlice(moe.down_, e));
    SEAM_RETURN_IF_ERROR(CopyInto(host.first, gate_up));
    SEAM_RETURN_IF_ERROR(CopyInto(host.second, down));
    moe.experts_.push_back(DenseMlp::Of(std::move(gate_up), std::move(down)));
  }
  const bool fits = experts <= kernels::kMaxGroupedExperts && moe.top_k_ <= kernels::kMaxRoutesPerRow &&
                    kernels::ExpertMatmulTakes(ctx.dtype, moe.gate_up_.dim(2)) &&
                    kernels::ExpertMatmulTakes(ctx.dtype, moe.down_.dim(2));
  if (fits && ctx.moe_experts == MoeExperts::kGrouped) {
    moe.grouped_pairs_ = kernels::kMaxExpertPairs;
  } else if (fits && ctx.moe_experts == MoeExperts::kAuto && ctx.device.is_cuda()) {
    moe.grouped_pairs_ = kAutoGroupedPairs;
  }
  return moe;
}

int64_t MoeBlock::grouped_max_rows() const { return grouped_pairs_ / top_k_; }

absl::StatusOr<MoeBlock::Slots> MoeBlock::RunGrouped(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), h = x.dim(1), experts = router_.dim(0), k = top_k_, pairs = n * k;
  const int64_t inner = down_.dim(2);
  Slots s{Tensor::Empty({pairs, h}, x.dtype(), dev), Tensor::Empty({n, k}, DType::kF32, dev)};
  Tensor logits = Tensor::Empty({n, experts}, DType::kF32, dev);
  Tensor ids = Tensor::Empty({n, k}, DType::kI32, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
  SEAM_RETURN_IF_ERROR(kernels::MoeRoute(logits, k, norm_topk_prob_, s.scales, ids));
  SEAM_RETURN_IF_ERROR(kernels::SortRoutesByExpert(s.scales, ids));
  SEAM_ASSIGN_OR_RETURN(kernels::ExpertGroups groups, kernels::ExpertGroups::Empty(experts, pairs, dev));
  SEAM_RETURN_IF_ERROR(kernels::GroupByExpert(ids, groups));
  Tensor gate_up = Tensor::Empty({pairs, 2 * inner}, x.dtype(), dev);
  Tensor act = Tensor::Empty({pairs, inner}, x.dtype(), dev);
  SEAM_RETURN_IF_ERROR(kernels::ExpertMatmul(x, gate_up_, groups, gate_up));
  SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gate_up, act));
  SEAM_RETURN_IF_ERROR(kernels::ExpertMatmul(act, down_, groups, s.expert_out));
  SEAM_ASSIGN_OR_RETURN(s.expert_out, s.expert_out.Reshape({n, k, h}));
  return s;
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
  if (n > 0 && Grouped(x)) {
    SEAM_ASSIGN_OR_RETURN(Slots s, RunGrouped(x));
    Tensor out = Tensor::Empty({n, h}, x.dtype(), dev);
    SEAM_RETURN_IF_ERROR(kernels::MoeFinalize(s.expert_out, s.scales, out));
    return out;
  }
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
  if (n > 0 && Grouped(x)) {
    SEAM_ASSIGN_OR_RETURN(Slots s, RunGrouped(x));
    auto complete = [s, n, h, dev]() -> absl::StatusOr<Tensor> {
      Tensor out = Tensor::Empty({n, h}, s.expert_out.dtype(), dev);
      SEAM_RETURN_IF_ERROR(kernels::MoeFinalize(s.expert_out, s.scales, out));
      return out;
    };
    return std::make_shared<const boundary::DeferredFinalize>(s.expert_out, s.scales, std::move(complete));
  }
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

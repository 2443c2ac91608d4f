// LongCat-Flash's shortcut MoE on one TP rank, on the tensors' device with
// no host round trip (a decode step holding it can be a CUDA graph):
// - the router (fp32, replicated) over routed and zero-computation experts,
//   MoeRouteBiased: softmax over all of them, the choice by score +
//   e_score_correction_bias, each weight its unbiased score ×
//   routed_scaling_factor;
// - the routed experts' pairs through RoutedExperts (routed_experts.h, as
//   Qwen3-MoE's: sorted by expert id, grouped over the routed experts only,
//   fused, grouped or one by one); a zero expert's id is ≥ the routed
//   count, so it is in no group;
// - a zero expert's slot holds its input row on rank 0 of the FFN's sum and
//   zeros on the sum's other ranks (IdentityExpertPairs), so the sum counts
//   it once;
// - MoeFinalize: each row's slots, sorted by expert id (the routed experts
//   ascending, then the zero experts ascending), weighted and summed in
//   fp32, rounded once to the compute dtype.
// Summation order: transformers adds each chosen expert's weighted output,
// routed or zero, into the output by ascending expert id, which is the
// order here; in bf16 it rounds after each addition, seam once. (seam
// before summed the zero experts apart and added them after the routed
// ones, rounding after each expert.)
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/boundary/replicated_component.h"
#include "seam/core/status.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"
#include "src/longcat_layers.h"

namespace seam::models::internal {

namespace {

// Expert e's [gate | up] rows and down columns of this TP rank, on the host,
// from a stacked gate_up [E', 2·I, H] and down [E, H, I] (E' ≥ E: transformers
// may stack the zero experts' unused slots too).
std::pair<Tensor, Tensor> StackedExpert(const std::vector<float>& gate_up, const std::vector<float>& down, int64_t e,
                                        int64_t inter, int64_t hidden, int r, int tp, DType dtype) {
  const int64_t part = inter / tp, lo = r * part;
  std::vector<float> gu;
  gu.reserve(2 * part * hidden);
  for (int half = 0; half < 2; ++half) {
    const float* base = gate_up.data() + (e * 2 * inter + half * inter + lo) * hidden;
    gu.insert(gu.end(), base, base + part * hidden);
  }
  std::vector<float> d(hidden * part);
  for (int64_t i = 0; i < hidden; ++i) {
    const float* row = down.data() + (e * hidden + i) * inter + lo;
    std::copy(row, row + part, d.begin() + i * part);
  }
  return {Tensor::FromFloats(gu, {2 * part, hidden}, dtype), Tensor::FromFloats(d, {hidden, part}, dtype)};
}

}  // namespace

absl::StatusOr<LongcatMoe> LongcatMoe::Load(const LoadContext& ctx, const std::string& p) {
  const weights::ModelConfig& c = ctx.config;
  const int64_t h = c.hidden_size, routed = c.num_experts, all = routed + c.zero_expert_num;
  const int64_t inter = c.moe_intermediate_size;
  const int r = ctx.options.topology.tp_rank, tp = ctx.options.topology.tp;
  if (inter % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(p, "experts: expert_ffn_hidden_size ", inter,
                                                   " does not divide over TP ", tp));
  }
  const weights::Checkpoint& ck = ctx.checkpoint;
  LongcatMoe moe;
  moe.top_k_ = c.num_experts_per_tok;
  moe.scaling_ = c.routed_scaling_factor;
  SEAM_ASSIGN_OR_RETURN(Tensor router, ck.Load(p + "router.classifier.weight", {all, h}, DType::kF32));
  SEAM_ASSIGN_OR_RETURN(moe.router_, ctx.Place(router));
  SEAM_ASSIGN_OR_RETURN(Tensor bias, ck.Load(p + "router.e_score_correction_bias", {all}, DType::kF32));
  SEAM_ASSIGN_OR_RETURN(moe.bias_, ctx.Place(bias));
  const std::string stacked = p + "experts.gate_up_proj";
  if (!ck.Has(stacked)) {
    SEAM_ASSIGN_OR_RETURN(moe.experts_, RoutedExperts::Load(ctx, routed, moe.top_k_, [&](int64_t e) {
      return DenseMlp::LoadHost(ctx, absl::StrCat(p, "experts.", e), inter);
    }, all));
    return moe;
  }
  absl::StatusOr<Tensor> gate_up = ck.Load(stacked, {all, 2 * inter, h}, DType::kF32);
  if (!gate_up.ok()) gate_up = ck.Load(stacked, {routed, 2 * inter, h}, DType::kF32);
  SEAM_RETURN_IF_ERROR(gate_up.status());
  SEAM_ASSIGN_OR_RETURN(Tensor down, ck.Load(p + "experts.down_proj", {routed, h, inter}, DType::kF32));
  const std::vector<float> gu = gate_up->ToFloats(), dn = down.ToFloats();
  const DType dtype = ctx.options.dtype;
  SEAM_ASSIGN_OR_RETURN(moe.experts_, RoutedExperts::Load(ctx, routed, moe.top_k_, [&](int64_t e) {
    return absl::StatusOr<std::pair<Tensor, Tensor>>(StackedExpert(gu, dn, e, inter, h, r, tp, dtype));
  }, all));
  return moe;
}

absl::StatusOr<Tensor> LongcatMoe::Forward(const Tensor& x, const boundary::StageBoundary& stage,
                                           const boundary::ForwardBatch& batch) const {
  const int64_t n = x.rows(), h = x.dim(1), k = top_k_;
  const Device dev = x.device();
  Tensor scales = Tensor::Empty({n, k}, DType::kF32, dev), ids = Tensor::Empty({n, k}, DType::kI32, dev);
  if (n != 0) {
    Tensor logits = Tensor::Empty({n, router_.dim(0)}, DType::kF32, dev);
    SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
    SEAM_RETURN_IF_ERROR(kernels::MoeRouteBiased(logits, bias_, k, scaling_, scales, ids));
  }
  SEAM_ASSIGN_OR_RETURN(ExpertSlots s, experts_.Run(x, scales, ids));  // ids now sorted by expert
  SEAM_ASSIGN_OR_RETURN(Tensor pairs, s.expert_out.Reshape({n * k, h}));
  // The zero experts' input, counted once: on rank 0 of the sum only.
  SEAM_RETURN_IF_ERROR(
      kernels::IdentityExpertPairs(x, ids, experts_.experts(), boundary::IsSumRankZero(stage, batch), pairs));
  Tensor out = Tensor::Empty({n, h}, x.dtype(), dev);
  SEAM_RETURN_IF_ERROR(kernels::MoeFinalize(s.expert_out, s.scales, out));
  return out;  // partial over TP: the boundary completes the sum
}

}  // namespace seam::models::internal

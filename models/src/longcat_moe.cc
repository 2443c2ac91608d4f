// LongCat-Flash's shortcut MoE on one TP rank: the router on the host over
// routed and zero-computation experts (the score-correction bias chooses,
// the unbiased scores weigh, times routed_scaling_factor), each routed
// expert's rows through its gate/up/down slices (ScatterAddRows adds them
// weighted, by ascending expert id as transformers does), and the zero
// experts' weighted inputs added once, on rank 0 of the FFN's sum.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "seam/boundary/replicated_component.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/longcat_layers.h"

namespace seam::models::internal {

std::vector<RowRoutes> RouteWithZeroExperts(const std::vector<float>& logits, int64_t rows, int64_t experts,
                                            const std::vector<float>& bias, int64_t top_k, float scaling) {
  std::vector<RowRoutes> out(rows);
  std::vector<float> scores(experts), choice(experts);
  std::vector<int32_t> order(experts);
  for (int64_t t = 0; t < rows; ++t) {
    const float* l = logits.data() + t * experts;
    const float most = *std::max_element(l, l + experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += (scores[e] = std::exp(l[e] - most));
    for (int64_t e = 0; e < experts; ++e) {
      scores[e] /= sum;
      choice[e] = scores[e] + bias[e];
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
    });
    for (int64_t k = 0; k < top_k; ++k) {
      out[t].experts.push_back(order[k]);
      out[t].weights.push_back(scores[order[k]] * scaling);
    }
  }
  return out;
}

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
  moe.bias_ = bias.ToFloats();
  const std::string stacked = p + "experts.gate_up_proj";
  if (!ck.Has(stacked)) {
    for (int64_t e = 0; e < routed; ++e) {
      SEAM_ASSIGN_OR_RETURN(auto host, DenseMlp::LoadHost(ctx, absl::StrCat(p, "experts.", e), inter));
      SEAM_ASSIGN_OR_RETURN(Tensor gate_up, ctx.Place(host.first));
      SEAM_ASSIGN_OR_RETURN(Tensor down, ctx.Place(host.second));
      moe.experts_.emplace_back(std::move(gate_up), std::move(down));
    }
    return moe;
  }
  absl::StatusOr<Tensor> gate_up = ck.Load(stacked, {all, 2 * inter, h}, DType::kF32);
  if (!gate_up.ok()) gate_up = ck.Load(stacked, {routed, 2 * inter, h}, DType::kF32);
  SEAM_RETURN_IF_ERROR(gate_up.status());
  SEAM_ASSIGN_OR_RETURN(Tensor down, ck.Load(p + "experts.down_proj", {routed, h, inter}, DType::kF32));
  const std::vector<float> gu = gate_up->ToFloats(), dn = down.ToFloats();
  for (int64_t e = 0; e < routed; ++e) {
    auto host = StackedExpert(gu, dn, e, inter, h, r, tp, ctx.options.dtype);
    SEAM_ASSIGN_OR_RETURN(Tensor g, ctx.Place(host.first));
    SEAM_ASSIGN_OR_RETURN(Tensor d, ctx.Place(host.second));
    moe.experts_.emplace_back(std::move(g), std::move(d));
  }
  return moe;
}

absl::StatusOr<Tensor> LongcatMoe::Forward(const Tensor& x, const boundary::StageBoundary& stage,
                                           const boundary::ForwardBatch& batch) const {
  const int64_t n = x.rows(), h = x.dim(1), all = router_.dim(0), routed = static_cast<int64_t>(experts_.size());
  const Device dev = x.device();
  Tensor out = Tensor::Zeros({n, h}, x.dtype(), dev);
  Tensor zero_part = Tensor::Zeros({n, h}, x.dtype(), dev);
  if (n != 0) {
    Tensor logits = Tensor::Empty({n, all}, DType::kF32, dev);
    SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
    SEAM_ASSIGN_OR_RETURN(Tensor host, logits.On(Device::CPU()));
    const std::vector<RowRoutes> routes = RouteWithZeroExperts(host.ToFloats(), n, all, bias_, top_k_, scaling_);
    std::vector<std::vector<int32_t>> rows(all);
    std::vector<std::vector<float>> weights(all);
    for (int64_t t = 0; t < n; ++t) {
      for (size_t k = 0; k < routes[t].experts.size(); ++k) {
        rows[routes[t].experts[k]].push_back(static_cast<int32_t>(t));
        weights[routes[t].experts[k]].push_back(routes[t].weights[k]);
      }
    }
    for (int64_t e = 0; e < all; ++e) {
      const int64_t m = static_cast<int64_t>(rows[e].size());
      if (m == 0) continue;
      SEAM_ASSIGN_OR_RETURN(Tensor at, Tensor::FromInts(rows[e], {m}).On(dev));
      SEAM_ASSIGN_OR_RETURN(Tensor w, Tensor::FromFloats(weights[e], {m}).On(dev));
      Tensor picked = Tensor::Empty({m, h}, x.dtype(), dev);
      SEAM_RETURN_IF_ERROR(kernels::GatherRows(x, at, picked));
      if (e >= routed) {  // a zero expert: its input, weighted
        SEAM_RETURN_IF_ERROR(kernels::ScatterAddRows(zero_part, picked, at, w));
        continue;
      }
      const auto& [gate_up, down] = experts_[e];
      const int64_t inner = down.dim(1);
      Tensor gu = Tensor::Empty({m, 2 * inner}, x.dtype(), dev), act = Tensor::Empty({m, inner}, x.dtype(), dev);
      Tensor y = Tensor::Empty({m, h}, x.dtype(), dev);
      SEAM_RETURN_IF_ERROR(kernels::Matmul(picked, gate_up, gu));
      SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gu, act));
      SEAM_RETURN_IF_ERROR(kernels::Matmul(act, down, y));
      SEAM_RETURN_IF_ERROR(kernels::ScatterAddRows(out, y, at, w));
    }
  }
  // The zero experts' part is whole on every rank: the sum counts it once.
  return boundary::AddReplicatedOnSumRankZero(out, zero_part, stage, batch);
}

}  // namespace seam::models::internal

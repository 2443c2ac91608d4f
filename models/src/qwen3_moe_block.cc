// The Qwen3-MoE sparse block on one TP rank: a replicated router (fp32
// softmax, top-k, optional renormalisation as Hugging Face does: MoeRoute)
// and every expert's intermediate slice, stacked [E, ...]. The routes are
// sorted by expert id and the (row, expert) pairs grouped by expert on the
// tensors' device (seam/kernels/moe_experts.h); then, as
// ModelOptions::moe_experts and the batch's size choose, either
// - fused: gate, up and the SiLU-mul in one pass over every expert's pairs
//   (ExpertGateUpSilu), then the down projection back to pair order
//   (ExpertDown), the decode GEMV or the tensor-core grouped GEMM as the
//   batch's routes choose; nothing comes to the host, so a step holding the
//   block can be a CUDA graph at any batch size;
// - grouped: the earlier GEMV per projection (ExpertMatmul) and a separate
//   SiLU-mul, also without the host; or
// - one by one: the group offsets read on the host, the pairs' rows
//   gathered in group order and each expert's slice of them run through its
//   own matmuls (cuBLASLt's kernels use an expert's weight for all its rows
//   at once), scattered back in pair order.
// Either way each row's expert outputs are summed in ascending expert order
// in fp32 (MoeFinalize, or fused into the final norm: ForwardDeferred), and
// the result is this rank's partial sum of the MoE output.
#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"
#include "src/qwen3_layers.h"

namespace seam::models::internal {

namespace {

// MoeExperts::kClassic (and kAuto where the tensor-core kernel does not
// serve) groups a batch's experts on CUDA up to this many routes (rows ×
// top-k): decode batches up to the largest default graph bucket (128
// sequences at top-8). Measured on an H200 (bench/results/
// 2026-12-01-h200-moe-grouped/run4-one-by-one: 4 layers of Qwen3-30B-A3B's
// shape, bf16, a prefill of one prompt): grouped took 0.60x the time of one
// by one at 1024 routes, 1.36x at 2048 and 6.4x at 65536. Larger batches run
// one by one, where cuBLASLt's kernels use each expert's weight for all of
// its rows at once (the grouped GEMV re-reads it every 8 rows).
constexpr int64_t kAutoGroupedPairs = 1024;

// How a block of this load runs a batch of at most `grouped_pairs` routes
// on the device: fused or through ExpertMatmul; larger batches one by one.
struct ExpertPlan {
  int64_t grouped_pairs = 0;
  bool fused = false;
  kernels::ExpertKernel kernel = kernels::ExpertKernel::kAuto;  // the fused ops' choice
};

ExpertPlan PlanExperts(MoeExperts choice, const Device& device, DType dtype, int64_t hidden, int64_t inter,
                       bool fits) {
  using kernels::ExpertKernel;
  if (!fits) return {};
  // Where the tensor-core kernel does not take the shapes (f32; rows not of
  // whole 16-byte chunks) the fused ops run the GEMV at every size.
  const bool tensor_cores = kernels::ExpertKernelTakes(ExpertKernel::kTensorCore, dtype, hidden) &&
                            kernels::ExpertKernelTakes(ExpertKernel::kTensorCore, dtype, inter);
  const ExpertKernel fused_kernel = tensor_cores ? ExpertKernel::kAuto : ExpertKernel::kGemv;
  switch (choice) {
    case MoeExperts::kAuto:
      if (!device.is_cuda()) return {};
      return {tensor_cores ? kernels::kMaxExpertPairs : kAutoGroupedPairs, true, fused_kernel};
    case MoeExperts::kFused:
      return {kernels::kMaxExpertPairs, true, fused_kernel};
    case MoeExperts::kGrouped:
      return {kernels::kMaxExpertPairs, false};
    case MoeExperts::kClassic:
      return {device.is_cuda() ? kAutoGroupedPairs : 0, false};
    case MoeExperts::kPerExpert:
      break;
  }
  return {};
}

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
                                                           host.first.dtype(), ctx.options.device));
      SEAM_ASSIGN_OR_RETURN(moe.down_, Tensor::TryEmpty({experts, host.second.dim(0), host.second.dim(1)},
                                                        host.second.dtype(), ctx.options.device));
    }
    SEAM_ASSIGN_OR_RETURN(Tensor gate_up, ExpertSlice(moe.gate_up_, e));
    SEAM_ASSIGN_OR_RETURN(Tensor down, ExpertSlice(moe.down_, e));
    SEAM_RETURN_IF_ERROR(CopyInto(host.first, gate_up));
    SEAM_RETURN_IF_ERROR(CopyInto(host.second, down));
  }
  // The GEMV's 16-byte rows bound both ways of running grouped (the CPU reference takes any).
  const bool fits = experts <= kernels::kMaxGroupedExperts && moe.top_k_ <= kernels::kMaxRoutesPerRow &&
                    kernels::ExpertMatmulTakes(ctx.options.dtype, moe.gate_up_.dim(2)) &&
                    kernels::ExpertMatmulTakes(ctx.options.dtype, moe.down_.dim(2));
  const ExpertPlan plan =
      PlanExperts(ctx.options.moe_experts, ctx.options.device, ctx.options.dtype, moe.gate_up_.dim(2),
                  moe.down_.dim(2), fits);
  moe.grouped_pairs_ = plan.grouped_pairs;
  moe.fused_ = plan.fused;
  moe.kernel_ = plan.kernel;
  return moe;
}

int64_t MoeBlock::grouped_max_rows() const { return grouped_pairs_ / top_k_; }

absl::StatusOr<MoeBlock::Slots> MoeBlock::Run(const Tensor& x) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), h = x.dim(1), experts = router_.dim(0), k = top_k_, pairs = n * k;
  const int64_t inner = down_.dim(2);
  Slots s{Tensor::Empty({pairs, h}, x.dtype(), dev), Tensor::Empty({n, k}, DType::kF32, dev)};
  if (n == 0) {
    SEAM_ASSIGN_OR_RETURN(s.expert_out, s.expert_out.Reshape({n, k, h}));
    return s;
  }
  Tensor logits = Tensor::Empty({n, experts}, DType::kF32, dev);
  Tensor ids = Tensor::Empty({n, k}, DType::kI32, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, router_, logits));
  SEAM_RETURN_IF_ERROR(kernels::MoeRoute(logits, k, norm_topk_prob_, s.scales, ids));
  SEAM_RETURN_IF_ERROR(kernels::SortRoutesByExpert(s.scales, ids));
  SEAM_ASSIGN_OR_RETURN(kernels::ExpertGroups groups, kernels::ExpertGroups::Empty(experts, pairs, dev));
  SEAM_RETURN_IF_ERROR(kernels::GroupByExpert(ids, groups));
  Tensor act = Tensor::Empty({pairs, inner}, x.dtype(), dev);
  if (Grouped(x) && fused_) {  // act in group order, the outputs back in pair order
    SEAM_RETURN_IF_ERROR(kernels::ExpertGateUpSilu(x, gate_up_, groups, act, kernel_));
    SEAM_RETURN_IF_ERROR(kernels::ExpertDown(act, down_, groups, s.expert_out, kernel_));
    SEAM_ASSIGN_OR_RETURN(s.expert_out, s.expert_out.Reshape({n, k, h}));
    return s;
  }
  Tensor gate_up = Tensor::Empty({pairs, 2 * inner}, x.dtype(), dev);
  if (Grouped(x)) {
    SEAM_RETURN_IF_ERROR(kernels::ExpertMatmul(x, gate_up_, groups, gate_up));
    SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gate_up, act));
    SEAM_RETURN_IF_ERROR(kernels::ExpertMatmul(act, down_, groups, s.expert_out));
  } else {
    // One by one: the pairs' rows in group order, each expert's slice of
    // them through its own matmuls (the offsets read on the host), back in
    // pair order.
    SEAM_ASSIGN_OR_RETURN(Tensor offsets, groups.offsets.On(Device::CPU()));
    const int32_t* at = offsets.data<int32_t>();
    Tensor rows = Tensor::Empty({pairs, h}, x.dtype(), dev);
    Tensor out = Tensor::Empty({pairs, h}, x.dtype(), dev);
    SEAM_RETURN_IF_ERROR(kernels::GatherPairs(x, groups, rows));
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t m = at[e + 1] - at[e];
      if (m == 0) continue;
      SEAM_ASSIGN_OR_RETURN(Tensor w, ExpertSlice(gate_up_, e));
      SEAM_RETURN_IF_ERROR(kernels::Matmul(rows.Rows(at[e], m), w, gate_up.Rows(at[e], m)));
    }
    SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gate_up, act));
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t m = at[e + 1] - at[e];
      if (m == 0) continue;
      SEAM_ASSIGN_OR_RETURN(Tensor w, ExpertSlice(down_, e));
      SEAM_RETURN_IF_ERROR(kernels::Matmul(act.Rows(at[e], m), w, out.Rows(at[e], m)));
    }
    SEAM_RETURN_IF_ERROR(kernels::ScatterPairs(out, groups, s.expert_out));
  }
  SEAM_ASSIGN_OR_RETURN(s.expert_out, s.expert_out.Reshape({n, k, h}));
  return s;
}

absl::StatusOr<Tensor> MoeBlock::Forward(const Tensor& x) const {
  SEAM_ASSIGN_OR_RETURN(Slots s, Run(x));
  Tensor out = Tensor::Empty({x.rows(), x.dim(1)}, x.dtype(), x.device());
  SEAM_RETURN_IF_ERROR(kernels::MoeFinalize(s.expert_out, s.scales, out));
  return out;  // partial over TP: never reduced here
}

absl::StatusOr<std::shared_ptr<const boundary::DeferredFinalize>> MoeBlock::ForwardDeferred(const Tensor& x) const {
  SEAM_ASSIGN_OR_RETURN(Slots s, Run(x));
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

// RoutedExperts: the experts of a MoE block, stacked on the device, and the
// three ways a batch's routes run through them (routed_experts.h):
// - fused: gate, up and the SiLU-mul in one pass over every expert's pairs
//   (ExpertGateUpSilu), then the down projection back to pair order
//   (ExpertDown), the decode GEMV or the tensor-core grouped GEMM as the
//   batch's routes choose; nothing comes to the host, so a step holding the
//   block can be a CUDA graph at any batch size;
// - grouped: the earlier GEMV per projection (ExpertMatmul) and a separate
//   SiLU-mul, also without the host (under kAuto on CUDA, fused or grouped
//   per batch row count, as both timed at load: expert_path_choice.h); or
// - one by one: the group offsets read on the host, the pairs' rows
//   gathered in group order and each expert's slice of them run through its
//   own matmuls (cuBLASLt's kernels use an expert's weight for all its rows
//   at once), scattered back in pair order.
#include "src/routed_experts.h"

#include "absl/strings/str_cat.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

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
  bool timed = false;  // fused or grouped per batch rows, both timed at load
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
      return {tensor_cores ? kernels::kMaxExpertPairs : kAutoGroupedPairs, true, fused_kernel, true};
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

absl::StatusOr<RoutedExperts> RoutedExperts::Load(const LoadContext& ctx, int64_t experts, int64_t top_k,
                                                  const HostExpert& expert, int64_t route_ids) {
  if (route_ids == 0) route_ids = experts;
  if (experts <= 0 || top_k <= 0 || route_ids < experts || route_ids < top_k) {
    return absl::InvalidArgumentError(absl::StrCat("routed experts: expected experts and top-k ≥ 1 and route ids ≥ "
                                                   "both, got ", experts, ", ", top_k, " and ", route_ids));
  }
  RoutedExperts out;
  out.top_k_ = top_k;
  for (int64_t e = 0; e < experts; ++e) {
    SEAM_ASSIGN_OR_RETURN(auto host, expert(e));
    if (e == 0) {
      SEAM_ASSIGN_OR_RETURN(out.gate_up_, Tensor::TryEmpty({experts, host.first.dim(0), host.first.dim(1)},
                                                           host.first.dtype(), ctx.options.device));
      SEAM_ASSIGN_OR_RETURN(out.down_, Tensor::TryEmpty({experts, host.second.dim(0), host.second.dim(1)},
                                                        host.second.dtype(), ctx.options.device));
    }
    SEAM_ASSIGN_OR_RETURN(Tensor gate_up, ExpertSlice(out.gate_up_, e));
    SEAM_ASSIGN_OR_RETURN(Tensor down, ExpertSlice(out.down_, e));
    SEAM_RETURN_IF_ERROR(CopyInto(host.first, gate_up));
    SEAM_RETURN_IF_ERROR(CopyInto(host.second, down));
  }
  // The GEMV's 16-byte rows bound both ways of running grouped (the CPU reference takes any).
  const bool fits = experts <= kernels::kMaxGroupedExperts && top_k <= kernels::kMaxRoutesPerRow &&
                    kernels::ExpertMatmulTakes(ctx.options.dtype, out.gate_up_.dim(2)) &&
                    kernels::ExpertMatmulTakes(ctx.options.dtype, out.down_.dim(2));
  const ExpertPlan plan = PlanExperts(ctx.options.moe_experts, ctx.options.device, ctx.options.dtype,
                                      out.gate_up_.dim(2), out.down_.dim(2), fits);
  out.grouped_pairs_ = plan.grouped_pairs;
  out.fused_ = plan.fused;
  out.kernel_ = plan.kernel;
  if (plan.timed && out.grouped_max_rows() > 0) {
    const ExpertShapeKey key{DTypeName(ctx.options.dtype), experts,   out.gate_up_.dim(2), out.down_.dim(2),
                             top_k,                        route_ids, out.grouped_max_rows()};
    SEAM_ASSIGN_OR_RETURN(out.table_, CachedExpertPathTable(key, [&]() -> absl::StatusOr<ExpertPathTable> {
      absl::StatusOr<ExpertPathTable> table = out.TimePaths(route_ids);
      if (!table.ok()) {  // the load's default stays: fused for every batch
        SEAM_LOG_WARN("routed experts ({}): timing fused against grouped failed, every batch runs fused: {}",
                      key.ToString(), table.status().ToString());
        return ExpertPathTable();
      }
      SEAM_LOG_INFO("routed experts ({}): fused or grouped per batch rows, timed at load:\n{}", key.ToString(),
                    table->ToString());
      return table;
    }));
  }
  return out;
}

ExpertPath RoutedExperts::PathFor(int64_t rows) const {
  if (!table_.empty()) return table_.For(rows);
  return fused_ ? ExpertPath::kFused : ExpertPath::kGrouped;
}

absl::Status RoutedExperts::RunGroupedOn(const Tensor& x, const kernels::ExpertGroups& groups, ExpertPath path,
                                         const Tensor& gate_up, const Tensor& act, const Tensor& out) const {
  if (path == ExpertPath::kFused) {  // act in group order, the outputs back in pair order
    SEAM_RETURN_IF_ERROR(kernels::ExpertGateUpSilu(x, gate_up_, groups, act, kernel_));
    return kernels::ExpertDown(act, down_, groups, out, kernel_);
  }
  SEAM_RETURN_IF_ERROR(kernels::ExpertMatmul(x, gate_up_, groups, gate_up));
  SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gate_up, act));
  return kernels::ExpertMatmul(act, down_, groups, out);
}

absl::StatusOr<ExpertSlots> RoutedExperts::Run(const Tensor& x, const Tensor& weights, const Tensor& ids) const {
  const Device dev = x.device();
  const int64_t n = x.rows(), h = x.dim(1), k = ids.dim(1), pairs = n * k, experts = this->experts();
  const int64_t inner = down_.dim(2);
  ExpertSlots s{Tensor::Empty({pairs, h}, x.dtype(), dev), weights};
  if (n == 0) {
    SEAM_ASSIGN_OR_RETURN(s.expert_out, s.expert_out.Reshape({n, k, h}));
    return s;
  }
  SEAM_RETURN_IF_ERROR(kernels::SortRoutesByExpert(weights, ids));
  SEAM_ASSIGN_OR_RETURN(kernels::ExpertGroups groups, kernels::ExpertGroups::Empty(experts, pairs, dev));
  SEAM_RETURN_IF_ERROR(kernels::GroupByExpert(ids, groups));
  Tensor act = Tensor::Empty({pairs, inner}, x.dtype(), dev);
  const ExpertPath path = PathFor(n);
  Tensor gate_up;  // the grouped and one-by-one paths' scratch
  if (!Grouped(x) || path == ExpertPath::kGrouped) gate_up = Tensor::Empty({pairs, 2 * inner}, x.dtype(), dev);
  if (Grouped(x)) {
    SEAM_RETURN_IF_ERROR(RunGroupedOn(x, groups, path, gate_up, act, s.expert_out));
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

}  // namespace seam::models::internal

// The device-side expert ops of seam/kernels/moe_experts.h: argument
// validation, then dispatch by device (dispatch.h).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/moe_experts.h"
#include "src/dispatch.h"

namespace seam::kernels {

using internal::CommonDevice;
using internal::ExpectDimSize;
using internal::ExpectFloatTensor;
using internal::ExpectIndexTensor;

namespace {

absl::Status ExpectF32(const Tensor& t, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDType(t, DType::kF32, what));
  return ExpectContiguous(t, what);
}

// The groups' three buffers: i32, contiguous, sized for E experts and P pairs.
absl::Status ExpectGroups(const ExpertGroups& g) {
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(g.offsets, "groups.offsets"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(g.order, "groups.order"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(g.active, "groups.active"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(g.tile_starts, "groups.tile_starts"));
  const int64_t experts = g.experts(), pairs = g.pairs();
  if (experts < 1 || experts > kMaxGroupedExperts) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups: expected 1 to ", kMaxGroupedExperts, " experts, got ", experts));
  }
  if (pairs > kMaxExpertPairs) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups: at most ", kMaxExpertPairs, " pairs are grouped on the device, got ", pairs));
  }
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&g.active, "groups.active"},
                                 {&g.tile_starts, "groups.tile_starts"}}) {
    if (t->numel() != 1 + std::min(experts, pairs)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": expected ", 1 + std::min(experts, pairs), " values, got ", t->numel()));
    }
  }
  return absl::OkStatus();
}

// P pairs spread evenly over the rows of x (pair p reads row p / (P / M)).
absl::Status ExpectRowsDividePairs(const Tensor& x, const char* x_name, int64_t pairs) {
  if (pairs > 0 && (x.dim(0) == 0 || pairs % x.dim(0) != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(x_name, ": its ", x.dim(0), " rows do not divide the ", pairs, " pairs"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExpertGroups> ExpertGroups::Empty(int64_t experts, int64_t pairs, Device device) {
  if (experts < 1 || pairs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExpertGroups: expected experts ≥ 1 and pairs ≥ 0, got ", experts, " and ", pairs));
  }
  ExpertGroups g;
  SEAM_ASSIGN_OR_RETURN(g.offsets, Tensor::TryEmpty({experts + 1}, DType::kI32, device));
  SEAM_ASSIGN_OR_RETURN(g.order, Tensor::TryEmpty({pairs}, DType::kI32, device));
  SEAM_ASSIGN_OR_RETURN(g.active, Tensor::TryEmpty({1 + std::min(experts, pairs)}, DType::kI32, device));
  SEAM_ASSIGN_OR_RETURN(g.tile_starts, Tensor::TryEmpty({1 + std::min(experts, pairs)}, DType::kI32, device));
  return g;
}

absl::Status SortRoutesByExpert(const Tensor& weights, const Tensor& ids) {
  SEAM_RETURN_IF_ERROR(ExpectF32(weights, "weights"));
  SEAM_RETURN_IF_ERROR(ExpectRank(weights, 2, "weights"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(ids, "ids"));
  SEAM_RETURN_IF_ERROR(ExpectShape(ids, weights.shape(), "ids"));
  if (ids.dim(1) > kMaxRoutesPerRow) {
    return absl::InvalidArgumentError(
        absl::StrCat("ids: at most ", kMaxRoutesPerRow, " routes per row, got ", ids.dim(1)));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&weights, "weights"}, {&ids, "ids"}}));
  SEAM_KERNELS_DISPATCH(device, SortRoutesByExpert, weights, ids);
}

absl::Status GroupByExpert(const Tensor& ids, const ExpertGroups& groups) {
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(ids, "ids"));
  SEAM_RETURN_IF_ERROR(ExpectGroups(groups));
  if (ids.numel() != groups.pairs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ids: expected the groups' ", groups.pairs(), " pairs, got ", ids.numel()));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&ids, "ids"}, {&groups.offsets, "groups.offsets"},
                                                     {&groups.order, "groups.order"},
                                                     {&groups.active, "groups.active"},
                                                     {&groups.tile_starts, "groups.tile_starts"}}));
  SEAM_KERNELS_DISPATCH(device, GroupByExpert, ids, groups);
}

absl::Status ExpertMatmul(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(w, "w"));
  SEAM_RETURN_IF_ERROR(ExpectRank(w, 3, "w"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectGroups(groups));
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&w, "w"}, {&out, "out"}}) {
    if (t->dtype() != x.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected the dtype of x (", DTypeName(x.dtype()),
                                                     "), got ", DTypeName(t->dtype())));
    }
  }
  SEAM_RETURN_IF_ERROR(ExpectDimSize(w, 0, groups.experts(), "w"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(w, 2, x.dim(1), "w"));
  const int64_t pairs = groups.pairs();
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {pairs, w.dim(1)}, "out"));
  SEAM_RETURN_IF_ERROR(ExpectRowsDividePairs(x, "x", pairs));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&w, "w"}, {&out, "out"},
                                                     {&groups.offsets, "groups.offsets"}}));
  SEAM_KERNELS_DISPATCH(device, ExpertMatmul, x, w, groups, out);
}

ExpertKernel ChooseExpertKernel(ExpertKernel kernel, DType dtype, int64_t pairs) {
  if (kernel != ExpertKernel::kAuto) return kernel;
  if (dtype == DType::kF32 || pairs <= kTensorCorePairs) return ExpertKernel::kGemv;
  return ExpertKernel::kTensorCore;
}

bool ExpertKernelTakes(ExpertKernel kernel, DType dtype, int64_t k) {
  if (kernel == ExpertKernel::kTensorCore) {
    return (dtype == DType::kBF16 || dtype == DType::kF16) && k > 0 && k % 8 == 0;
  }
  return ExpertMatmulTakes(dtype, k);
}

namespace {

// One projection of the fused pair: x [M or P, K] and out [P, N] of w's
// dtype, w [E, rows, K]; `per_pair` when x has one row per pair.
absl::Status ExpectFusedProjection(const Tensor& x, const char* x_name, const Tensor& w, const ExpertGroups& groups,
                                   const Tensor& out, const char* out_name, int64_t out_cols, bool per_pair) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, x_name));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, x_name));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(w, "w"));
  SEAM_RETURN_IF_ERROR(ExpectRank(w, 3, "w"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, out_name));
  SEAM_RETURN_IF_ERROR(ExpectGroups(groups));
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&w, "w"}, {&out, out_name}}) {
    if (t->dtype() != x.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected the dtype of ", x_name, " (",
                                                     DTypeName(x.dtype()), "), got ", DTypeName(t->dtype())));
    }
  }
  SEAM_RETURN_IF_ERROR(ExpectDimSize(w, 0, groups.experts(), "w"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(w, 2, x.dim(1), "w"));
  const int64_t pairs = groups.pairs();
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {pairs, out_cols}, out_name));
  if (per_pair) return ExpectDimSize(x, 0, pairs, x_name);
  return ExpectRowsDividePairs(x, x_name, pairs);
}

}  // namespace

absl::Status ExpertGateUpSilu(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& act,
                              ExpertKernel kernel) {
  if (w.rank() == 3 && w.dim(1) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("w: expected [E, 2I, K] (gate rows, then up rows), got ",
                                                   ShapeToString(w.shape())));
  }
  SEAM_RETURN_IF_ERROR(ExpectFusedProjection(x, "x", w, groups, act, "act", w.rank() == 3 ? w.dim(1) / 2 : 0, false));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&w, "w"}, {&act, "act"},
                                                     {&groups.offsets, "groups.offsets"}}));
  if (device.is_cpu()) return cpu::ExpertGateUpSilu(x, w, groups, act);
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
  return cuda::ExpertGateUpSilu(x, w, groups, act, ChooseExpertKernel(kernel, x.dtype(), groups.pairs()));
#else
  return internal::NoCudaKernel("ExpertGateUpSilu");
#endif
}

absl::Status ExpertDown(const Tensor& act, const Tensor& w, const ExpertGroups& groups, const Tensor& out,
                        ExpertKernel kernel) {
  SEAM_RETURN_IF_ERROR(
      ExpectFusedProjection(act, "act", w, groups, out, "out", w.rank() == 3 ? w.dim(1) : 0, /*per_pair=*/true));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&act, "act"}, {&w, "w"}, {&out, "out"},
                                                     {&groups.offsets, "groups.offsets"}}));
  if (device.is_cpu()) return cpu::ExpertDown(act, w, groups, out);
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
  return cuda::ExpertDown(act, w, groups, out, ChooseExpertKernel(kernel, act.dtype(), groups.pairs()));
#else
  return internal::NoCudaKernel("ExpertDown");
#endif
}

namespace {

// x [M, H] and out [P, H] of one dtype, P = the groups' pairs, a multiple of M.
absl::Status ExpectPairRows(const Tensor& x, const char* x_name, const Tensor& out, const char* out_name,
                            const ExpertGroups& groups, bool x_per_row) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, x_name));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, x_name));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, out_name));
  SEAM_RETURN_IF_ERROR(ExpectGroups(groups));
  const int64_t pairs = groups.pairs();
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {pairs, x.dim(1)}, out_name));
  if (out.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(out_name, ": expected the dtype of ", x_name, " (",
                                                   DTypeName(x.dtype()), "), got ", DTypeName(out.dtype())));
  }
  if (!x_per_row) return ExpectShape(x, {pairs, out.dim(1)}, x_name);
  return ExpectRowsDividePairs(x, x_name, pairs);
}

}  // namespace

absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectPairRows(x, "x", out, "out", groups, /*x_per_row=*/true));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&out, "out"}, {&groups.offsets, "groups.offsets"}}));
  SEAM_KERNELS_DISPATCH(device, GatherPairs, x, groups, out);
}

absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectPairRows(src, "src", out, "out", groups, /*x_per_row=*/false));
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&src, "src"}, {&out, "out"}, {&groups.offsets, "groups.offsets"}}));
  SEAM_KERNELS_DISPATCH(device, ScatterPairs, src, groups, out);
}

absl::Status IdentityExpertPairs(const Tensor& x, const Tensor& ids, int64_t first, bool copy_input,
                                 const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(ids, "ids"));
  SEAM_RETURN_IF_ERROR(ExpectRank(ids, 2, "ids"));
  if (ids.dim(0) != x.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("ids: expected the ", x.dim(0), " rows of x, got ", ids.dim(0)));
  }
  if (first < 0) return absl::InvalidArgumentError(absl::StrCat("first: expected ≥ 0, got ", first));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {ids.numel(), x.dim(1)}, "out"));
  if (out.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("out: expected the dtype of x (", DTypeName(x.dtype()), "), got ",
                                                   DTypeName(out.dtype())));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&ids, "ids"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, IdentityExpertPairs, x, ids, first, copy_input, out);
}

bool ExpertMatmulTakes(DType dtype, int64_t k) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) return false;
  return k > 0 && (k * static_cast<int64_t>(DTypeSize(dtype))) % 16 == 0;
}

absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(expert_out, "expert_out"));
  SEAM_RETURN_IF_ERROR(ExpectRank(expert_out, 3, "expert_out"));
  SEAM_RETURN_IF_ERROR(ExpectF32(scales, "scales"));
  SEAM_RETURN_IF_ERROR(ExpectShape(scales, {expert_out.dim(0), expert_out.dim(1)}, "scales"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {expert_out.dim(0), expert_out.dim(2)}, "out"));
  if (out.dtype() != expert_out.dtype() && out.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("out: expected the dtype of expert_out (",
                                                   DTypeName(expert_out.dtype()), ") or f32, got ",
                                                   DTypeName(out.dtype())));
  }
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&expert_out, "expert_out"}, {&scales, "scales"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, MoeFinalize, expert_out, scales, out);
}

}  // namespace seam::kernels

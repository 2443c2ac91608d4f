// The mixture-of-experts ops of seam/kernels/ops.h: argument validation, then
// dispatch by device (dispatch.h).
#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/dispatch.h"

namespace seam::kernels {

using internal::CommonDevice;
using internal::ExpectDimSize;
using internal::ExpectFloatTensor;
using internal::ExpectIndexTensor;

namespace {

// A router's logits [T, E] (floating), top_k in [1, E], and its outputs:
// weights f32 [T, top_k], ids i32 [T, top_k].
absl::Status CheckRoute(const Tensor& logits, int64_t top_k, const Tensor& weights, const Tensor& ids) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(logits, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectRank(logits, 2, "logits"));
  if (top_k < 1 || top_k > logits.dim(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k: expected a value in [1, ", logits.dim(1), "] (the experts), got ", top_k));
  }
  if (weights.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("weights: expected f32, got ", DTypeName(weights.dtype())));
  }
  SEAM_RETURN_IF_ERROR(ExpectShape(weights, {logits.dim(0), top_k}, "weights"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(ids, "ids"));
  return ExpectShape(ids, {logits.dim(0), top_k}, "ids");
}

}  // namespace

absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool renormalize, const Tensor& weights,
                      const Tensor& ids) {
  SEAM_RETURN_IF_ERROR(CheckRoute(logits, top_k, weights, ids));
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&logits, "logits"}, {&weights, "weights"}, {&ids, "ids"}}));
  SEAM_KERNELS_DISPATCH(device, MoeRoute, logits, top_k, renormalize, weights, ids);
}

absl::Status MoeRouteBiased(const Tensor& logits, const Tensor& bias, int64_t top_k, float scaling,
                            const Tensor& weights, const Tensor& ids) {
  SEAM_RETURN_IF_ERROR(CheckRoute(logits, top_k, weights, ids));
  if (bias.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("bias: expected f32, got ", DTypeName(bias.dtype())));
  }
  SEAM_RETURN_IF_ERROR(ExpectShape(bias, {logits.dim(1)}, "bias"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&logits, "logits"}, {&bias, "bias"}, {&weights, "weights"},
                                                     {&ids, "ids"}}));
  SEAM_KERNELS_DISPATCH(device, MoeRouteBiased, logits, bias, top_k, scaling, weights, ids);
}

absl::Status GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(rows, "rows"));
  SEAM_RETURN_IF_ERROR(ExpectRank(rows, 1, "rows"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {rows.dim(0), x.dim(1)}, "out"));
  if (out.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("out: expected the dtype of x (", DTypeName(x.dtype()),
                                                   "), got ", DTypeName(out.dtype())));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&rows, "rows"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, GatherRows, x, rows, out);
}

absl::Status ScatterAddRows(const Tensor& dst, const Tensor& src, const Tensor& rows, const Tensor& weights) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(dst, "dst"));
  SEAM_RETURN_IF_ERROR(ExpectRank(dst, 2, "dst"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(rows, "rows"));
  SEAM_RETURN_IF_ERROR(ExpectRank(rows, 1, "rows"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(src, "src"));
  SEAM_RETURN_IF_ERROR(ExpectShape(src, {rows.dim(0), dst.dim(1)}, "src"));
  if (weights.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("weights: expected f32, got ", DTypeName(weights.dtype())));
  }
  SEAM_RETURN_IF_ERROR(ExpectShape(weights, {rows.dim(0)}, "weights"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&dst, "dst"}, {&src, "src"}, {&rows, "rows"},
                                                     {&weights, "weights"}}));
  SEAM_KERNELS_DISPATCH(device, ScatterAddRows, dst, src, rows, weights);
}

}  // namespace seam::kernels

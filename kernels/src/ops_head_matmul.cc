// Validation and dispatch of HeadMatmul (seam/kernels/head_matmul.h).
#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/head_matmul.h"
#include "src/dispatch.h"

namespace seam::kernels {

using internal::CommonDevice;

namespace {

// A [T, H, inner] view: last stride 1, heads and rows not overlapping.
absl::Status ExpectHeadView(const Tensor& t, const char* what) {
  const std::vector<int64_t>& s = t.strides();
  const int64_t heads = t.dim(1), inner = t.dim(2);
  const bool ok = (inner <= 1 || s[2] == 1) && (heads <= 1 || s[1] >= inner) &&
                  (t.dim(0) <= 1 || s[0] >= (heads - 1) * s[1] + inner);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": expected a row-major view with unit last stride, got shape ",
                                                 ShapeToString(t.shape()), " strides [", s[0], ", ", s[1], ", ",
                                                 s[2], "]"));
}

absl::Status ExpectHeadDType(const Tensor& t, DType want, const char* what) {
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("HeadMatmul: ", what, " dtype ", DTypeName(t.dtype()), " is not supported (f32 or bf16)"));
  }
  return ExpectDType(t, want, what);
}

}  // namespace

absl::Status HeadMatmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectDefined(w, "w"));
  SEAM_RETURN_IF_ERROR(ExpectDefined(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 3, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(w, 3, "w"));
  SEAM_RETURN_IF_ERROR(ExpectHeadDType(x, x.dtype(), "x"));
  SEAM_RETURN_IF_ERROR(ExpectHeadDType(w, x.dtype(), "w"));
  SEAM_RETURN_IF_ERROR(ExpectHeadDType(out, x.dtype(), "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(w, {x.dim(1), w.dim(1), x.dim(2)}, "w"));
  SEAM_RETURN_IF_ERROR(ExpectContiguous(w, "w"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {x.dim(0), x.dim(1), w.dim(1)}, "out"));
  SEAM_RETURN_IF_ERROR(ExpectHeadView(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectHeadView(out, "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&w, "w"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, HeadMatmul, x, w, out);
}

}  // namespace seam::kernels

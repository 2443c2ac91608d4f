// The dense ops of seam/kernels/ops.h: argument validation, then dispatch by
// device (dispatch.h). Attention lives in ops_attention.cc, probabilities and
// sampling in ops_sampling.cc.
#include <cmath>

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

absl::Status ExpectFloatOfRank(const Tensor& t, int rank, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(t, what));
  return ExpectRank(t, rank, what);
}

absl::Status ExpectEps(float eps) {
  if (std::isfinite(eps) && eps >= 0.0f) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("eps: expected a finite value >= 0, got ", eps));
}

// Validation shared by RmsNorm and FusedAddRmsNorm: x [T, H], weight [H], out like x.
absl::Status ExpectNormArgs(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(weight, "weight"));
  SEAM_RETURN_IF_ERROR(ExpectShape(weight, {x.dim(1)}, "weight"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, x.shape(), "out"));
  return ExpectEps(eps);
}

}  // namespace

absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(w, 2, "w"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(w, 1, x.dim(1), "w"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {x.dim(0), w.dim(0)}, "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&w, "w"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, Matmul, x, w, out);
}

absl::Status Embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(ids, "ids"));
  SEAM_RETURN_IF_ERROR(ExpectRank(ids, 1, "ids"));
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(table, 2, "table"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {ids.dim(0), table.dim(1)}, "out"));
  if (vocab_start < 0) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_start: expected >= 0, got ", vocab_start));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&ids, "ids"}, {&table, "table"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, Embedding, ids, table, vocab_start, out);
}

absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectNormArgs(x, weight, eps, out));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&weight, "weight"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, RmsNorm, x, weight, eps, out);
}

absl::Status FusedAddRmsNorm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps,
                             const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectNormArgs(x, weight, eps, out));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(residual, "residual"));
  SEAM_RETURN_IF_ERROR(ExpectShape(residual, x.shape(), "residual"));
  if (out.raw_data() == residual.raw_data() && out.numel() > 0) {
    return absl::InvalidArgumentError("out: must not alias residual (it may alias x)");
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&residual, "residual"}, {&weight, "weight"},
                                                     {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, FusedAddRmsNorm, x, residual, weight, eps, out);
}

absl::Status MoeFinalizeAddRmsNorm(const Tensor& expert_out, const Tensor& scales, const Tensor& residual,
                                   const Tensor& weight, float eps, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(expert_out, 3, "expert_out"));
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(residual, 2, "residual"));
  SEAM_RETURN_IF_ERROR(ExpectShape(residual, {expert_out.dim(0), expert_out.dim(2)}, "residual"));
  SEAM_RETURN_IF_ERROR(ExpectNormArgs(residual, weight, eps, out));
  if (scales.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("scales: expected f32, got ", DTypeName(scales.dtype())));
  }
  SEAM_RETURN_IF_ERROR(ExpectShape(scales, {expert_out.dim(0), expert_out.dim(1)}, "scales"));
  if (out.raw_data() == residual.raw_data() && out.numel() > 0) {
    return absl::InvalidArgumentError("out: must not alias residual");
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&expert_out, "expert_out"}, {&scales, "scales"},
                                                     {&residual, "residual"}, {&weight, "weight"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, MoeFinalizeAddRmsNorm, expert_out, scales, residual, weight, eps, out);
}

absl::Status SiluAndMul(const Tensor& input, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(input, 2, "input"));
  if (input.dim(1) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("input: expected an even number of columns [gate | up], got shape ",
                                                   ShapeToString(input.shape())));
  }
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {input.dim(0), input.dim(1) / 2}, "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&input, "input"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, SiluAndMul, input, out);
}

absl::Status RotaryEmbedding(const Tensor& q, const Tensor& k, const Tensor& positions, float theta,
                             int64_t rotary_dim) {
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(q, 3, "q"));
  SEAM_RETURN_IF_ERROR(ExpectFloatOfRank(k, 3, "k"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(k, 0, q.dim(0), "k"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(k, 2, q.dim(2), "k"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(positions, "positions"));
  SEAM_RETURN_IF_ERROR(ExpectShape(positions, {q.dim(0)}, "positions"));
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > q.dim(2)) {
    return absl::InvalidArgumentError(absl::StrCat("rotary_dim: expected an even value in [2, head_dim ",
                                                   q.dim(2), "], got ", rotary_dim));
  }
  if (!std::isfinite(theta) || theta <= 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat("theta: expected a finite value > 0, got ", theta));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&q, "q"}, {&k, "k"}, {&positions, "positions"}}));
  SEAM_KERNELS_DISPATCH(device, RotaryEmbedding, q, k, positions, theta, rotary_dim);
}

absl::Status AddInPlace(const Tensor& dst, const Tensor& src) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(dst, "dst"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(src, "src"));
  SEAM_RETURN_IF_ERROR(ExpectSameShape(dst, src, "dst", "src"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&dst, "dst"}, {&src, "src"}}));
  SEAM_KERNELS_DISPATCH(device, AddInPlace, dst, src);
}

}  // namespace seam::kernels

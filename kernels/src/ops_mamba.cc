// The state-space ops of seam/kernels/ops.h (Mamba2's conv1d, selective scan
// and gated norm) and the squared ReLU: argument validation, then dispatch
// by device. Values of the index tensors are checked where they are read.
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

absl::Status ExpectFloatShape(const Tensor& t, const Shape& shape, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(t, what));
  return ExpectShape(t, shape, what);
}

// query_start i32 [S + 1] and state_slots i32 [S], on the op's device: the
// CPU reference checks their values as it reads them; the CUDA kernels read
// them on the device and keep out-of-range slots from any access.
absl::Status ExpectSequences(const SequenceStates& seqs) {
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(seqs.state_slots, "state_slots"));
  SEAM_RETURN_IF_ERROR(ExpectRank(seqs.state_slots, 1, "state_slots"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(seqs.query_start, "query_start"));
  return ExpectShape(seqs.query_start, {seqs.state_slots.dim(0) + 1}, "query_start");
}

}  // namespace

absl::Status ReluSquared(const Tensor& x, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(out, x.shape(), "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, ReluSquared, x, out);
}

absl::Status CausalConv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                          const Tensor& conv_state, const SequenceStates& seqs, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(weight, "weight"));
  SEAM_RETURN_IF_ERROR(ExpectRank(weight, 2, "weight"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(weight, 0, x.dim(1), "weight"));
  if (weight.dim(1) < 1) return absl::InvalidArgumentError("weight: the kernel needs at least one tap");
  if (bias.defined()) SEAM_RETURN_IF_ERROR(ExpectFloatShape(bias, {x.dim(1)}, "bias"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(conv_state, "conv_state"));
  SEAM_RETURN_IF_ERROR(ExpectRank(conv_state, 3, "conv_state"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(conv_state, 1, weight.dim(1) - 1, "conv_state"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(conv_state, 2, x.dim(1), "conv_state"));
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(out, x.shape(), "out"));
  SEAM_RETURN_IF_ERROR(ExpectSequences(seqs));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&weight, "weight"}, {&conv_state, "conv_state"},
                                                     {&out, "out"}, {&seqs.query_start, "query_start"},
                                                     {&seqs.state_slots, "state_slots"}}));
  if (bias.defined() && bias.device() != device) return absl::InvalidArgumentError("bias is on another device");
  SEAM_KERNELS_DISPATCH(device, CausalConv1d, x, weight, bias, silu, conv_state, seqs, out);
}

absl::Status SelectiveScan(const SelectiveScanParams& p) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(p.x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(p.x, 3, "x"));
  const int64_t t = p.x.dim(0), h = p.x.dim(1), hd = p.x.dim(2);
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(p.dt, {t, h}, "dt"));
  for (const auto& [tensor, name] : {std::make_pair(&p.dt_bias, "dt_bias"), std::make_pair(&p.a, "a"),
                                     std::make_pair(&p.d, "d")}) {
    SEAM_RETURN_IF_ERROR(ExpectFloatShape(*tensor, {h}, name));
  }
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(p.b, "b"));
  SEAM_RETURN_IF_ERROR(ExpectRank(p.b, 3, "b"));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(p.b, 0, t, "b"));
  const int64_t g = p.b.dim(1), n = p.b.dim(2);
  if (g < 1 || h % g != 0) {
    return absl::InvalidArgumentError(absl::StrCat("b: ", g, " groups do not divide the ", h, " heads"));
  }
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(p.c, p.b.shape(), "c"));
  if (p.ssm_state.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("ssm_state: expected f32, got ", DTypeName(p.ssm_state.dtype())));
  }
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(p.ssm_state, "ssm_state"));
  SEAM_RETURN_IF_ERROR(ExpectRank(p.ssm_state, 4, "ssm_state"));
  SEAM_RETURN_IF_ERROR(ExpectShape(p.ssm_state.Rows(0, std::min<int64_t>(1, p.ssm_state.dim(0))),
                                   {std::min<int64_t>(1, p.ssm_state.dim(0)), h, hd, n}, "ssm_state"));
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(p.out, p.x.shape(), "out"));
  if (std::isnan(p.dt_min) || std::isnan(p.dt_max) || p.dt_min > p.dt_max) {
    return absl::InvalidArgumentError(absl::StrCat("dt limits: expected min <= max, got [", p.dt_min, ", ",
                                                   p.dt_max, "]"));
  }
  if (p.chunk != 0 && p.chunk != 32 && p.chunk != 64) {
    return absl::InvalidArgumentError(absl::StrCat("chunk: expected 32 or 64 (0: the default), got ", p.chunk));
  }
  SEAM_RETURN_IF_ERROR(ExpectSequences(p.seqs));
  SEAM_ASSIGN_OR_RETURN(Device device,
                        CommonDevice({{&p.x, "x"}, {&p.dt, "dt"}, {&p.dt_bias, "dt_bias"}, {&p.a, "a"},
                                      {&p.b, "b"}, {&p.c, "c"}, {&p.d, "d"}, {&p.ssm_state, "ssm_state"},
                                      {&p.out, "out"}, {&p.seqs.query_start, "query_start"},
                                      {&p.seqs.state_slots, "state_slots"}}));
  SEAM_KERNELS_DISPATCH(device, SelectiveScan, p);
}

bool ChunkedScanTakes(DType dtype, int64_t head_dim, int64_t state) {
  return (dtype == DType::kBF16 || dtype == DType::kF16) && head_dim > 0 && head_dim % 32 == 0 &&
         (state == 64 || state == 128);
}

absl::Status GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, int64_t group_size, float eps,
                          const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(z, x.shape(), "z"));
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(weight, {x.dim(1)}, "weight"));
  SEAM_RETURN_IF_ERROR(ExpectFloatShape(out, x.shape(), "out"));
  if (group_size < 1 || x.dim(1) % group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("group_size: expected a divisor of ", x.dim(1), ", got ",
                                                   group_size));
  }
  if (!std::isfinite(eps) || eps < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat("eps: expected a finite value >= 0, got ", eps));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&z, "z"}, {&weight, "weight"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, GatedRmsNorm, x, z, weight, group_size, eps, out);
}

}  // namespace seam::kernels

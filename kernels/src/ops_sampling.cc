// The probability and sampling ops of seam/kernels/ops.h (validation, then
// dispatch by device) and SampleUniform, the counter-based uniform that makes
// a draw reproducible from (seed, step) on every device.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/sampling_seed.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/dispatch.h"

namespace seam::kernels {

using internal::CommonDevice;
using internal::ExpectFloatTensor;
using internal::ExpectIndexTensor;

namespace {

// logits: floating [T, N] with N >= 1.
absl::Status ExpectLogits(const Tensor& logits, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(logits, what));
  SEAM_RETURN_IF_ERROR(ExpectRank(logits, 2, what));
  if (logits.dim(1) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected at least one column, got shape ",
                                                   ShapeToString(logits.shape())));
  }
  return absl::OkStatus();
}

absl::Status ExpectSamplingParams(const SamplingParams& p) {
  if (std::isnan(p.temperature)) return absl::InvalidArgumentError("temperature: expected a number, got nan");
  if (p.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k: expected >= 0, got ", p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p: expected a value in (0, 1], got ", p.top_p));
  }
  return absl::OkStatus();
}

}  // namespace

// Exact integer recipe (so a CUDA version gives the same bits):
//   h = mix(mix(seed) ^ step), mix = seam::SplitMix64;
//   u = (h >> 40) / 2^24, exact in fp32.
float SampleUniform(uint64_t seed, uint64_t step) {
  const uint64_t h = SplitMix64(SplitMix64(seed) ^ step);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

absl::Status Softmax(const Tensor& x, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, x.shape(), "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, Softmax, x, out);
}

absl::Status Argmax(const Tensor& logits, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectLogits(logits, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {logits.dim(0)}, "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&logits, "logits"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, Argmax, logits, out);
}

absl::Status Sample(const Tensor& logits, const SamplingParams& params, const Tensor& steps, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectLogits(logits, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectSamplingParams(params));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(steps, "steps"));
  SEAM_RETURN_IF_ERROR(ExpectShape(steps, {logits.dim(0)}, "steps"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, {logits.dim(0)}, "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&logits, "logits"}, {&steps, "steps"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, Sample, logits, params, steps, out);
}

absl::Status EditLogits(const Tensor& logits, const Tensor& at, const Tensor& by) {
  SEAM_RETURN_IF_ERROR(ExpectDType(logits, DType::kF32, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectContiguous(logits, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectRank(logits, 2, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(at, "at"));
  SEAM_RETURN_IF_ERROR(ExpectRank(at, 2, "at"));
  if (at.dim(1) != 2) {
    return absl::InvalidArgumentError(absl::StrCat("at: expected [edits, 2], got ", ShapeToString(at.shape())));
  }
  SEAM_RETURN_IF_ERROR(ExpectDType(by, DType::kF32, "by"));
  SEAM_RETURN_IF_ERROR(ExpectContiguous(by, "by"));
  SEAM_RETURN_IF_ERROR(ExpectShape(by, at.shape(), "by"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&logits, "logits"}, {&at, "at"}, {&by, "by"}}));
  SEAM_KERNELS_DISPATCH(device, EditLogits, logits, at, by);
}

absl::Status TokenLogProbs(const Tensor& logits, const Tensor& tokens, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectLogits(logits, "logits"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(tokens, "tokens"));
  SEAM_RETURN_IF_ERROR(ExpectRank(tokens, 2, "tokens"));
  if (tokens.dim(0) != logits.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("tokens: expected ", logits.dim(0), " rows, got shape ",
                                                   ShapeToString(tokens.shape())));
  }
  SEAM_RETURN_IF_ERROR(ExpectDType(out, DType::kF32, "out"));
  SEAM_RETURN_IF_ERROR(ExpectContiguous(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectShape(out, tokens.shape(), "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&logits, "logits"}, {&tokens, "tokens"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, TokenLogProbs, logits, tokens, out);
}

absl::Status TopK(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(x, "x"));
  SEAM_RETURN_IF_ERROR(ExpectRank(x, 2, "x"));
  if (k < 0 || k > x.dim(1)) {
    return absl::InvalidArgumentError(absl::StrCat("k: expected a value in [0, ", x.dim(1), "], got ", k));
  }
  SEAM_RETURN_IF_ERROR(ExpectDType(values, DType::kF32, "values"));
  SEAM_RETURN_IF_ERROR(ExpectContiguous(values, "values"));
  SEAM_RETURN_IF_ERROR(ExpectShape(values, {x.dim(0), k}, "values"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(indices, "indices"));
  SEAM_RETURN_IF_ERROR(ExpectShape(indices, {x.dim(0), k}, "indices"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&x, "x"}, {&values, "values"}, {&indices, "indices"}}));
  SEAM_KERNELS_DISPATCH(device, TopK, x, k, values, indices);
}

}  // namespace seam::kernels

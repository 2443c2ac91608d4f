#include "seam/boundary/mhc.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/mhc.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {
namespace {

absl::Status ExpectStreams(const Tensor& residual, int64_t width, int n) {
  SEAM_RETURN_IF_ERROR(ExpectRank(residual, 2, "MHC residual"));
  if (residual.dim(1) != width * n) {
    return absl::InvalidArgumentError(absl::StrCat("MHC residual is ", residual.dim(1), " wide; ", n,
                                                   " streams of ", width, " need ", width * n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMhc(const MhcCoefficients& c) {
  const size_t n = c.streams;
  if (c.streams < 1) return absl::InvalidArgumentError("MHC needs at least one stream");
  if (c.streams > kernels::kMaxMhcStreams) {
    return absl::InvalidArgumentError(
        absl::StrCat("MHC of ", n, " streams: at most ", kernels::kMaxMhcStreams, " are served"));
  }
  if (c.pre.size() != n || c.post.size() != n || c.res.size() != n * n) {
    return absl::InvalidArgumentError(absl::StrCat("MHC coefficients of ", n, " streams need pre[", n, "], post[", n,
                                                   "] and res[", n * n, "]; got ", c.pre.size(), ", ",
                                                   c.post.size(), ", ", c.res.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const MhcUpdate>> MhcUpdate::Make(MhcCoefficients coefficients) {
  SEAM_RETURN_IF_ERROR(ValidateMhc(coefficients));
  return std::shared_ptr<const MhcUpdate>(new MhcUpdate(std::move(coefficients)));
}

absl::Status MhcUpdate::Apply(const Tensor& contribution, const Tensor& residual) const {
  SEAM_RETURN_IF_ERROR(ExpectRank(contribution, 2, "MHC contribution"));
  SEAM_RETURN_IF_ERROR(ExpectStreams(residual, contribution.dim(1), c_.streams));
  if (contribution.rows() != residual.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MHC contribution has ", contribution.rows(), " rows; the residual ", residual.rows()));
  }
  const Tensor y = contribution.is_contiguous() ? contribution : contribution.Clone();
  if (residual.is_contiguous()) return kernels::MhcPostMix(residual, y, c_.res, c_.post);
  const Tensor mixed = residual.Clone();
  SEAM_RETURN_IF_ERROR(kernels::MhcPostMix(mixed, y, c_.res, c_.post));
  return CopyInto(mixed, residual);
}

absl::StatusOr<std::shared_ptr<const MhcRead>> MhcRead::Make(MhcCoefficients coefficients, const NormParams* norm) {
  SEAM_RETURN_IF_ERROR(ValidateMhc(coefficients));
  if (norm == nullptr) return absl::InvalidArgumentError("MHC read needs its norm");
  return std::shared_ptr<const MhcRead>(new MhcRead(std::move(coefficients), norm));
}

absl::StatusOr<Tensor> MhcRead::InitResidual(const Tensor& input) const {
  SEAM_RETURN_IF_ERROR(ExpectRank(input, 2, "MHC stack input"));
  const int n = c_.streams;
  // Every stream starts as the input: the post mix of zero streams with
  // res = 0 and post = 1 (0 + 1 · x is x; a -0 input enters as +0).
  Tensor out = Tensor::Zeros({input.rows(), n * input.dim(1)}, input.dtype(), input.device());
  const Tensor x = input.is_contiguous() ? input : input.Clone();
  SEAM_RETURN_IF_ERROR(kernels::MhcPostMix(out, x, std::vector<float>(n * n, 0.0f), std::vector<float>(n, 1.0f)));
  return out;
}

absl::Status MhcRead::Read(const Tensor& residual, const Tensor& out) const {
  SEAM_RETURN_IF_ERROR(ExpectStreams(residual, out.dim(1), c_.streams));
  const Tensor x = residual.is_contiguous() ? residual : residual.Clone();
  // The mix rounds to the residual's dtype, then the norm reads it.
  Tensor mixed = Tensor::Empty({residual.rows(), out.dim(1)}, residual.dtype(), residual.device());
  SEAM_RETURN_IF_ERROR(kernels::MhcPreMix(x, c_.pre, mixed));
  return kernels::RmsNorm(mixed, norm_->weight, norm_->eps, out);
}

}  // namespace seam::boundary

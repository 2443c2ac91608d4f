#include "seam/boundary/mhc.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {
namespace {

absl::Status ExpectHost(const Tensor& t, const char* what) {
  if (!t.device().is_cpu()) {
    return absl::UnimplementedError(absl::StrCat("MHC ", what, " on a device tensor: only host tensors are served"));
  }
  return absl::OkStatus();
}

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
  SEAM_RETURN_IF_ERROR(ExpectHost(residual, "update"));
  SEAM_RETURN_IF_ERROR(ExpectRank(contribution, 2, "MHC contribution"));
  const int n = c_.streams;
  const int64_t rows = residual.rows(), h = contribution.dim(1);
  SEAM_RETURN_IF_ERROR(ExpectStreams(residual, h, n));
  if (contribution.rows() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("MHC contribution has ", contribution.rows(), " rows; the residual ", rows));
  }
  const std::vector<float> x = residual.ToFloats(), y = contribution.ToFloats();
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * n * h];
    for (int i = 0; i < n; ++i) {
      for (int64_t k = 0; k < h; ++k) {
        float acc = 0.0f;
        for (int j = 0; j < n; ++j) acc += c_.res[i * n + j] * xr[j * h + k];
        acc += c_.post[i] * y[r * h + k];
        out[(r * n + i) * h + k] = acc;
      }
    }
  }
  return CopyInto(Tensor::FromFloats(out, residual.shape(), residual.dtype()), residual);
}

absl::StatusOr<std::shared_ptr<const MhcRead>> MhcRead::Make(MhcCoefficients coefficients, const NormParams* norm) {
  SEAM_RETURN_IF_ERROR(ValidateMhc(coefficients));
  if (norm == nullptr) return absl::InvalidArgumentError("MHC read needs its norm");
  return std::shared_ptr<const MhcRead>(new MhcRead(std::move(coefficients), norm));
}

absl::StatusOr<Tensor> MhcRead::InitResidual(const Tensor& input) const {
  SEAM_RETURN_IF_ERROR(ExpectHost(input, "init_residual"));
  SEAM_RETURN_IF_ERROR(ExpectRank(input, 2, "MHC stack input"));
  const int n = c_.streams;
  const int64_t rows = input.rows(), h = input.dim(1);
  Tensor out = Tensor::Empty({rows, n * h}, input.dtype(), input.device());
  const std::vector<float> x = input.ToFloats();
  std::vector<float> e(rows * n * h);
  for (int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i)
      for (int64_t k = 0; k < h; ++k) e[(r * n + i) * h + k] = x[r * h + k];
  SEAM_RETURN_IF_ERROR(CopyInto(Tensor::FromFloats(e, out.shape(), out.dtype()), out));
  return out;
}

absl::Status MhcRead::Read(const Tensor& residual, const Tensor& out) const {
  SEAM_RETURN_IF_ERROR(ExpectHost(residual, "read"));
  const int n = c_.streams;
  const int64_t rows = residual.rows(), h = out.dim(1);
  SEAM_RETURN_IF_ERROR(ExpectStreams(residual, h, n));
  const std::vector<float> x = residual.ToFloats();
  std::vector<float> mixed(rows * h);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < h; ++k) {
      float acc = 0.0f;
      for (int i = 0; i < n; ++i) acc += c_.pre[i] * x[(r * n + i) * h + k];
      mixed[r * h + k] = acc;
    }
  }
  const Tensor m = Tensor::FromFloats(mixed, {rows, h}, residual.dtype());
  return kernels::RmsNorm(m, norm_->weight, norm_->eps, out);
}

}  // namespace seam::boundary

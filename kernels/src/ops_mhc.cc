// The MHC mixes of seam/kernels/mhc.h: argument validation, then dispatch by
// device (dispatch.h's rule, with the MHC launchers' own headers).
#include "absl/strings/str_cat.h"
#include "cpu/mhc_ops.h"
#include "seam/core/status.h"
#include "seam/kernels/mhc.h"
#include "src/dispatch.h"
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
#include "cuda/mhc_ops.h"
#endif

namespace seam::kernels {

using internal::CommonDevice;
using internal::ExpectDimSize;
using internal::ExpectFloatTensor;

namespace {

// n from the coefficients, and a residual [T, n·H] over streams of H = `width`.
absl::StatusOr<int> Streams(const Tensor& residual, int64_t width, size_t n) {
  if (n < 1 || n > static_cast<size_t>(kMaxMhcStreams)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MHC: expected 1 to ", kMaxMhcStreams, " streams, got ", n));
  }
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(residual, "residual"));
  SEAM_RETURN_IF_ERROR(ExpectRank(residual, 2, "residual"));
  if (residual.dim(1) != static_cast<int64_t>(n) * width) {
    return absl::InvalidArgumentError(absl::StrCat("residual: expected ", n, " streams of ", width, " columns (",
                                                   n * width, "), got ", ShapeToString(residual.shape())));
  }
  return static_cast<int>(n);
}

}  // namespace

absl::Status MhcPostMix(const Tensor& residual, const Tensor& y, const std::vector<float>& res,
                        const std::vector<float>& post) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(y, "y"));
  SEAM_RETURN_IF_ERROR(ExpectRank(y, 2, "y"));
  SEAM_ASSIGN_OR_RETURN(const int n, Streams(residual, y.dim(1), post.size()));
  SEAM_RETURN_IF_ERROR(ExpectDimSize(y, 0, residual.dim(0), "y"));
  if (res.size() != static_cast<size_t>(n) * n) {
    return absl::InvalidArgumentError(absl::StrCat("res: expected ", n * n, " values, got ", res.size()));
  }
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&residual, "residual"}, {&y, "y"}}));
  SEAM_KERNELS_DISPATCH(device, MhcPostMix, residual, y, res, post);
}

absl::Status MhcPreMix(const Tensor& residual, const std::vector<float>& pre, const Tensor& out) {
  SEAM_RETURN_IF_ERROR(ExpectFloatTensor(out, "out"));
  SEAM_RETURN_IF_ERROR(ExpectRank(out, 2, "out"));
  SEAM_RETURN_IF_ERROR(Streams(residual, out.dim(1), pre.size()).status());
  SEAM_RETURN_IF_ERROR(ExpectDimSize(out, 0, residual.dim(0), "out"));
  SEAM_ASSIGN_OR_RETURN(Device device, CommonDevice({{&residual, "residual"}, {&out, "out"}}));
  SEAM_KERNELS_DISPATCH(device, MhcPreMix, residual, pre, out);
}

}  // namespace seam::kernels

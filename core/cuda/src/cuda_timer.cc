#include "seam/core/cuda_timer.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

#ifdef SEAM_HAVE_CUDA
#include "seam/core/cuda_check.h"
#endif

namespace seam {

#ifdef SEAM_HAVE_CUDA

absl::StatusOr<CudaTimer> CudaTimer::Create(Device device) {
  if (!device.is_cuda()) return absl::InvalidArgumentError(absl::StrCat("CudaTimer on ", device.ToString()));
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  CudaTimer t;
  cudaEvent_t start = nullptr, stop = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  t.start_ = start;
  SEAM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  t.stop_ = stop;
  return t;
}

CudaTimer::~CudaTimer() {
  if (start_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

absl::Status CudaTimer::Start(const CudaStream& stream) {
  if (start_ == nullptr) return absl::FailedPreconditionError("CudaTimer::Start: no events");
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream.handle())));
  return absl::OkStatus();
}

absl::StatusOr<double> CudaTimer::StopUs(const CudaStream& stream) {
  if (stop_ == nullptr) return absl::FailedPreconditionError("CudaTimer::StopUs: no events");
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream.handle())));
  SEAM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float ms = 0;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return 1e3 * static_cast<double>(ms);
}

#else  // !SEAM_HAVE_CUDA

absl::StatusOr<CudaTimer> CudaTimer::Create(Device) {
  return absl::FailedPreconditionError("CudaTimer: this build has no CUDA path (SEAM_CUDA=OFF)");
}
CudaTimer::~CudaTimer() = default;
absl::Status CudaTimer::Start(const CudaStream&) { return absl::FailedPreconditionError("CudaTimer: no CUDA"); }
absl::StatusOr<double> CudaTimer::StopUs(const CudaStream&) {
  return absl::FailedPreconditionError("CudaTimer: no CUDA");
}

#endif

}  // namespace seam

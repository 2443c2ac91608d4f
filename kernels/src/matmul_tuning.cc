// The process-wide matmul tuning setting (seam/kernels/matmul_tuning.h); the
// choices themselves live with the CUDA launcher's per-thread plans.
#include "seam/kernels/matmul_tuning.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
#include "cuda/cuda_ops.h"
#endif

namespace seam::kernels {
namespace {

std::mutex& TuningMu() {
  static std::mutex mu;
  return mu;
}

MatmulTuning& Tuning() {
  static MatmulTuning tuning;
  return tuning;
}

}  // namespace

absl::Status SetMatmulTuning(const MatmulTuning& tuning) {
  if (tuning.candidates < 1 || tuning.candidates > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatmulTuning.candidates must be in [1, 64], got ", tuning.candidates));
  }
  if (tuning.timed_runs < 1 || tuning.timed_runs > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatmulTuning.timed_runs must be in [1, 100], got ", tuning.timed_runs));
  }
  if (tuning.max_tuned_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatmulTuning.max_tuned_rows must be at least 0, got ", tuning.max_tuned_rows));
  }
  std::lock_guard<std::mutex> lock(TuningMu());
  Tuning() = tuning;
  return absl::OkStatus();
}

MatmulTuning GetMatmulTuning() {
  std::lock_guard<std::mutex> lock(TuningMu());
  return Tuning();
}

std::vector<MatmulChoice> MatmulChoices() {
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
  return cuda::MatmulChoicesOnThread();
#else
  return {};
#endif
}

}  // namespace seam::kernels

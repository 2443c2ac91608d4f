// Mixture-of-experts routing and row movement on CUDA (placeholder until the kernels land).
#include "cuda/cuda_ops.h"

namespace seam::kernels::cuda {
absl::Status MoeRoute(const Tensor&, int64_t, bool, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("MoeRoute: no CUDA kernel yet");
}
absl::Status GatherRows(const Tensor&, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("GatherRows: no CUDA kernel yet");
}
absl::Status ScatterAddRows(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("ScatterAddRows: no CUDA kernel yet");
}
}  // namespace seam::kernels::cuda

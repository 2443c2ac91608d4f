// Probabilities and sampling on CUDA (placeholder until the kernels land).
#include "cuda/cuda_ops.h"

namespace seam::kernels::cuda {
absl::Status Softmax(const Tensor&, const Tensor&) { return absl::UnimplementedError("Softmax: no CUDA kernel yet"); }
absl::Status Argmax(const Tensor&, const Tensor&) { return absl::UnimplementedError("Argmax: no CUDA kernel yet"); }
absl::Status Sample(const Tensor&, const SamplingParams&, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("Sample: no CUDA kernel yet");
}
absl::Status TopK(const Tensor&, int64_t, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("TopK: no CUDA kernel yet");
}
}  // namespace seam::kernels::cuda

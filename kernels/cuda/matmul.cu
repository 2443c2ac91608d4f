// Matmul through cuBLAS (placeholder until the cuBLAS launcher lands).
#include "cuda/cuda_ops.h"

namespace seam::kernels::cuda {
absl::Status Matmul(const Tensor&, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("Matmul: no CUDA kernel yet");
}
}  // namespace seam::kernels::cuda

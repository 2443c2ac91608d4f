// Paged attention on CUDA (placeholder until the kernels land).
#include "cuda/cuda_ops.h"

namespace seam::kernels::cuda {
absl::Status WriteKvCache(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  return absl::UnimplementedError("WriteKvCache: no CUDA kernel yet");
}
absl::Status PagedAttention(const Tensor&, const Tensor&, const Tensor&, const AttentionBatch&, float,
                            const Tensor&) {
  return absl::UnimplementedError("PagedAttention: no CUDA kernel yet");
}
}  // namespace seam::kernels::cuda

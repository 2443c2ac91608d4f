// Element casts on a CUDA stream between 16-bit floats and fp32, so NCCL
// reductions of bf16/f16 are summed in fp32 and rounded once.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace seam::comm::internal {

enum class Half16 : uint8_t { kBF16, kF16 };

// dst[i] = float(src[i]) for i < n.
cudaError_t LaunchHalfToF32(const void* src, Half16 type, float* dst, int64_t n, cudaStream_t stream);
// dst[i] = round_to_nearest_even(src[i]) for i < n.
cudaError_t LaunchF32ToHalf(const float* src, Half16 type, void* dst, int64_t n, cudaStream_t stream);

}  // namespace seam::comm::internal

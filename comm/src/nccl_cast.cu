// CUDA kernels of nccl_cast.h: grid-stride element casts bf16/f16 <-> fp32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "nccl_cast.h"

namespace seam::comm::internal {
namespace {

template <typename H>
__global__ void ToF32Kernel(const H* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = static_cast<float>(src[i]);
  }
}

__device__ inline __nv_bfloat16 FromFloat(float v, __nv_bfloat16*) { return __float2bfloat16_rn(v); }
__device__ inline __half FromFloat(float v, __half*) { return __float2half_rn(v); }

template <typename H>
__global__ void FromF32Kernel(const float* src, H* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = FromFloat(src[i], static_cast<H*>(nullptr));
  }
}

constexpr int kThreads = 256;
unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

}  // namespace

cudaError_t LaunchHalfToF32(const void* src, Half16 type, float* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (type == Half16::kBF16) {
    ToF32Kernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), dst, n);
  } else {
    ToF32Kernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
  }
  return cudaGetLastError();
}

cudaError_t LaunchF32ToHalf(const float* src, Half16 type, void* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (type == Half16::kBF16) {
    FromF32Kernel<<<Blocks(n), kThreads, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
  } else {
    FromF32Kernel<<<Blocks(n), kThreads, 0, stream>>>(src, static_cast<__half*>(dst), n);
  }
  return cudaGetLastError();
}

}  // namespace seam::comm::internal

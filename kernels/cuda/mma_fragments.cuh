// The attention kernels' names for the warp-level tensor-core and
// async-copy pieces (internal to kernels/cuda): mma.sync m16n8k16, ldmatrix
// and cp.async from mma_sync.cuh, and packing two 16-bit values into one
// fragment register. T is __nv_bfloat16 or __half throughout.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda_common.cuh"
#include "mma_sync.cuh"

namespace seam::kernels::cuda::attn {

__device__ __forceinline__ uint16_t BitsOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint16_t BitsOf(__half v) { return __half_as_ushort(v); }

template <typename T>
__device__ __forceinline__ uint32_t PackPair(T lo, T hi) {
  return static_cast<uint32_t>(BitsOf(lo)) | (static_cast<uint32_t>(BitsOf(hi)) << 16);
}

using mma::CpAsync16;
using mma::CpAsyncCommit;
using mma::CpAsyncWait;
using mma::LdMatrixX4;
using mma::LdMatrixX4Trans;
using mma::Mma16816;

}  // namespace seam::kernels::cuda::attn

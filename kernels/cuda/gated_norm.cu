// GatedRmsNorm on CUDA: Mamba2's grouped gated RMSNorm. One block per
// (row, group): g = x · silu(z) in fp32, the block's sum of g² reduced
// through warp shuffles and shared memory, then out = weight · g / rms,
// recomputing g on the second pass rather than keeping the group on chip.
#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct GatedNormParams {
  const void* x;       // [rows, width], T
  const void* z;       // [rows, width], T
  const void* weight;  // [width], W
  void* out;           // [rows, width], T
  int64_t width, group_size;
  float eps;
};

template <typename T>
__device__ __forceinline__ float Gated(const T* x, const T* z, int64_t i) {
  const float gate = ToFloat(z[i]);
  return ToFloat(x[i]) * (gate / (1.0f + expf(-gate)));
}

template <typename T, typename W>
__global__ void __launch_bounds__(kThreads) GatedNormKernel(GatedNormParams p) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.width + static_cast<int64_t>(blockIdx.y) * p.group_size;
  const T* x = static_cast<const T*>(p.x) + base;
  const T* z = static_cast<const T*>(p.z) + base;
  const W* weight = static_cast<const W*>(p.weight) + static_cast<int64_t>(blockIdx.y) * p.group_size;
  T* out = static_cast<T*>(p.out) + base;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < p.group_size; i += kThreads) {
    const float g = Gated(x, z, i);
    sum += g * g;
  }
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(p.group_size) + p.eps);
  // out may alias x or z: each element is read by the thread that writes it, after the reduction.
  for (int64_t i = threadIdx.x; i < p.group_size; i += kThreads) {
    out[i] = FromFloat<T>(ToFloat(weight[i]) * (Gated(x, z, i) * inv_rms));
  }
}

}  // namespace

absl::Status GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, int64_t group_size, float eps,
                          const Tensor& out) {
  if (z.dtype() != x.dtype() || out.dtype() != x.dtype()) {
    return absl::UnimplementedError(absl::StrCat("GatedRmsNorm: CUDA kernel takes z and out in x's dtype ",
                                                 DTypeName(x.dtype())));
  }
  const int64_t rows = x.dim(0), groups = x.dim(1) / group_size;
  if (rows == 0) return absl::OkStatus();
  if (groups > 65535) {
    return absl::UnimplementedError(absl::StrCat("GatedRmsNorm: CUDA grid takes up to 65535 groups, got ", groups));
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "GatedRmsNorm"));
  const GatedNormParams p{x.raw_data(), z.raw_data(), weight.raw_data(), out.raw_data(), x.dim(1), group_size, eps};
  const dim3 grid(static_cast<unsigned int>(rows), static_cast<unsigned int>(groups));
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return DispatchSameOrF32<T>(weight.dtype(), "weight", [&](auto wtag) -> absl::Status {
      using W = typename decltype(wtag)::type;
      GatedNormKernel<T, W><<<grid, kThreads, 0, stream>>>(p);
      SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  });
}

}  // namespace seam::kernels::cuda

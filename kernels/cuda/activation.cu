// SiluAndMul and ReluSquared on CUDA. SiluAndMul: out[t, i] =
// silu(gate[t, i]) * up[t, i], where each input row is [gate | up]; a flat
// grid-stride loop over (row, vector) pairs, 16-byte vectors when the
// intermediate size and pointers allow. ReluSquared: one element per thread.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct SiluAndMulParams {
  const void* input;  // [rows, 2 * inter]
  void* out;          // [rows, inter]
  int64_t rows;
  int64_t inter;
};

template <typename T, int VEC>
__global__ void SiluAndMulKernel(const T* input, T* out, int64_t rows, int64_t inter) {
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t nvec = inter / VEC;
  const int64_t total = rows * nvec;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / nvec;
    const int64_t col = (idx - row * nvec) * VEC;
    const T* gate = input + row * 2 * inter + col;
    float g[VEC];
    float u[VEC];
    LoadFloats<T, VEC>(gate, g);
    LoadFloats<T, VEC>(gate + inter, u);
    float o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = g[j] / (1.f + expf(-g[j])) * u[j];
    StoreFloats<T, VEC>(out + row * inter + col, o);
  }
}

template <typename T, int VEC>
absl::Status Launch(const SiluAndMulParams& p, cudaStream_t stream) {
  const int64_t work = p.rows * (p.inter / VEC);
  return LaunchEnrolled({dim3(GridFor(work, kThreads)), dim3(kThreads), 0, stream}, SiluAndMulKernel<T, VEC>,
                        static_cast<const T*>(p.input), static_cast<T*>(p.out), p.rows, p.inter);
}

}  // namespace

absl::Status SiluAndMul(const Tensor& input, const Tensor& out) {
  if (out.dtype() != input.dtype()) {
    return absl::UnimplementedError(absl::StrCat("SiluAndMul: CUDA kernel writes out in input's dtype ",
                                                 DTypeName(input.dtype()), ", got ", DTypeName(out.dtype())));
  }
  if (out.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(input, "SiluAndMul"));
  const int64_t inter = out.dim(-1);
  const SiluAndMulParams p{input.raw_data(), out.raw_data(), out.numel() / inter, inter};
  const cudaStream_t stream = Stream();
  return DispatchFloat(input.dtype(), "input", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    constexpr int kVec = VecWidth<T>();
    // The up half starts `inter` elements into each row, so inter % kVec keeps it aligned too.
    if (p.inter % kVec == 0 && VecAligned<T>(p.input, kVec) && VecAligned<T>(p.out, kVec)) {
      return Launch<T, kVec>(p, stream);
    }
    return Launch<T, 1>(p, stream);
  });
}

}  // namespace seam::kernels::cuda

namespace seam::kernels::cuda {
namespace {

// out = max(x, 0)² elementwise; out may alias x.
template <typename T>
__global__ void ReluSquaredKernel(const T* x, T* out, int64_t n) {
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float r = fmaxf(ToFloat(x[i]), 0.0f);
    out[i] = FromFloat<T>(r * r);
  }
}

}  // namespace

absl::Status ReluSquared(const Tensor& x, const Tensor& out) {
  if (out.dtype() != x.dtype()) {
    return absl::UnimplementedError(absl::StrCat("ReluSquared: CUDA kernel writes out in x's dtype ",
                                                 DTypeName(x.dtype()), ", got ", DTypeName(out.dtype())));
  }
  if (x.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "ReluSquared"));
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return LaunchEnrolled({dim3(GridFor(x.numel(), kThreads)), dim3(kThreads), 0, stream}, ReluSquaredKernel<T>,
                          static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), x.numel());
  });
}

}  // namespace seam::kernels::cuda

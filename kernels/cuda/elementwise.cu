// AddInPlace on CUDA: dst += src over the flat element range, fp32 add rounded
// once to dst's dtype. dst and src may have different floating dtypes (e.g. an
// f32 partial sum added into a bf16 activation).
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct AddParams {
  void* dst;
  const void* src;
  int64_t n;
};

// Vectors cover the first n / VEC * VEC elements; scalars the rest.
template <typename D, typename S, int VEC>
__global__ void AddInPlaceKernel(D* dst, const S* src, int64_t n) {
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t nvec = n / VEC;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = first; v < nvec; v += stride) {
    float a[VEC];
    float b[VEC];
    LoadFloats<D, VEC>(dst + v * VEC, a);
    LoadFloats<S, VEC>(src + v * VEC, b);
#pragma unroll
    for (int j = 0; j < VEC; ++j) a[j] += b[j];
    StoreFloats<D, VEC>(dst + v * VEC, a);
  }
  for (int64_t i = nvec * VEC + first; i < n; i += stride) {
    dst[i] = FromFloat<D>(ToFloat(dst[i]) + ToFloat(src[i]));
  }
}

template <typename D, typename S, int VEC>
absl::Status Launch(const AddParams& p, cudaStream_t stream) {
  return LaunchEnrolled({dim3(GridFor(p.n / VEC + 1, kThreads)), dim3(kThreads), 0, stream},
                        AddInPlaceKernel<D, S, VEC>, static_cast<D*>(p.dst), static_cast<const S*>(p.src), p.n);
}

}  // namespace

absl::Status AddInPlace(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(dst, "AddInPlace"));
  const AddParams p{dst.raw_data(), src.raw_data(), dst.numel()};
  const cudaStream_t stream = Stream();
  return DispatchFloat(dst.dtype(), "dst", [&](auto d_tag) -> absl::Status {
    using D = typename decltype(d_tag)::type;
    return DispatchFloat(src.dtype(), "src", [&](auto s_tag) -> absl::Status {
      using S = typename decltype(s_tag)::type;
      constexpr int kVec = VecWidth<D, S>();
      if (VecAligned<D>(p.dst, kVec) && VecAligned<S>(p.src, kVec)) return Launch<D, S, kVec>(p, stream);
      return Launch<D, S, 1>(p, stream);
    });
  });
}

}  // namespace seam::kernels::cuda

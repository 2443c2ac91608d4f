// RMSNorm and fused residual-add + RMSNorm on CUDA. One kernel serves both:
// a block (or a warp per row, for small rows) reads the row once in 16-byte
// vectors, keeps the fp32 row in shared memory, reduces the sum of squares and
// writes the normalized row (and, fused, the rounded residual). The row
// arithmetic is rms_norm_row.cuh's, shared with allreduce_norm.cu.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"
#include "rms_norm_row.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kMaxThreadsPerRow = kRmsNormMaxThreadsPerRow;
constexpr int kRowsPerSmallBlock = 4;  // small rows (one warp each, see RmsNormRowThreads) share a block
constexpr size_t kDefaultSharedBytes = 48 * 1024;

struct NormParams {
  const void* x;
  void* residual;  // nullptr for plain RMSNorm
  const void* weight;
  void* out;  // may alias x
  int64_t rows;
  int hidden;
  float eps;
};

// blockDim.x threads (a multiple of 32) per row, blockDim.y rows per block.
// With `staged`, the fp32 row s lives in dynamic shared memory between the
// two passes; without it (rows too wide for shared memory) the second pass
// recomputes s = x + residual from the unchanged inputs, which gives the same
// fp32 values because the residual is only written in the second pass.
template <typename T, typename R, typename W, int VEC, bool kResidual>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    RmsNormKernel(const T* x, R* residual, const W* weight, T* out, int64_t rows, int hidden, float eps, bool staged) {
  extern __shared__ float staged_rows[];
  __shared__ float partial[32];
  __shared__ float inv_rms[32];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + ty;
  const bool active = row < rows;
  const int64_t base = row * hidden;
  const int nvec = hidden / VEC;
  // Vector-major layout (see StageVector).
  float* s_row = staged_rows + static_cast<int64_t>(ty) * hidden;
  PdlWait();  // x and residual come from the kernels before; every block waits (pdl_launch.cuh)
  PdlLaunchDependents();

  auto load_sum = [&](int v, float (&s)[VEC]) {
    LoadFloats<T, VEC>(x + base + static_cast<int64_t>(v) * VEC, s);
    if constexpr (kResidual) {
      float r[VEC];
      LoadFloats<R, VEC>(residual + base + static_cast<int64_t>(v) * VEC, r);
#pragma unroll
      for (int j = 0; j < VEC; ++j) s[j] += r[j];
    }
  };

  float sum_sq = 0.f;
  if (active) {
    for (int v = tx; v < nvec; v += blockDim.x) {
      float s[VEC];
      load_sum(v, s);
      AddSquares(s, sum_sq);
      if (staged) StageVector(s_row, nvec, v, s);
    }
  }
  const float inv = RowInvRms(sum_sq, hidden, eps, partial, inv_rms);
  if (!active) return;
  for (int v = tx; v < nvec; v += blockDim.x) {
    const int64_t at = base + static_cast<int64_t>(v) * VEC;
    float s[VEC];
    if (staged) {
      UnstageVector(s_row, nvec, v, s);
    } else {
      load_sum(v, s);
    }
    if constexpr (kResidual) StoreFloats<R, VEC>(residual + at, s);
    float w[VEC];
    LoadFloats<W, VEC>(weight + static_cast<int64_t>(v) * VEC, w);
    float o[VEC];
    NormalizeVector(s, inv, w, o);
    StoreFloats<T, VEC>(out + at, o);
  }
}

template <typename T, typename R, typename W, int VEC, bool kResidual>
absl::Status LaunchWithWidth(const NormParams& p, cudaStream_t stream) {
  const int nvec = p.hidden / VEC;
  const int threads = RmsNormRowThreads(nvec);
  const dim3 block = nvec <= kRmsNormSmallRowVectors ? dim3(threads, kRowsPerSmallBlock) : dim3(threads, 1);
  const int64_t blocks = (p.rows + block.y - 1) / block.y;
  auto kernel = RmsNormKernel<T, R, W, VEC, kResidual>;

  size_t shared_bytes = static_cast<size_t>(block.y) * p.hidden * sizeof(float);
  bool staged = true;
  if (shared_bytes > kDefaultSharedBytes) {
    int device = 0;
    int optin = 0;
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attrs;
    SEAM_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attrs, kernel));
    if (shared_bytes + attrs.sharedSizeBytes <= static_cast<size_t>(optin)) {
      SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(shared_bytes)));
    } else {
      staged = false;
      shared_bytes = 0;
    }
  }
  return LaunchEnrolled({dim3(static_cast<unsigned int>(blocks)), block, shared_bytes, stream}, kernel,
                        static_cast<const T*>(p.x), static_cast<R*>(p.residual), static_cast<const W*>(p.weight),
                        static_cast<T*>(p.out), p.rows, p.hidden, p.eps, staged);
}

// 16-byte vectors when the row length and every pointer allow; scalars otherwise.
template <typename T, typename R, typename W, bool kResidual>
absl::Status LaunchNorm(const NormParams& p, cudaStream_t stream) {
  constexpr int kVec = VecWidth<T, R, W>();
  const bool vectorized = p.hidden % kVec == 0 && VecAligned<T>(p.x, kVec) && VecAligned<T>(p.out, kVec) &&
                          VecAligned<W>(p.weight, kVec) && (!kResidual || VecAligned<R>(p.residual, kVec));
  if (vectorized) return LaunchWithWidth<T, R, W, kVec, kResidual>(p, stream);
  return LaunchWithWidth<T, R, W, 1, kResidual>(p, stream);
}

// x/out share one dtype; weight and residual are that dtype or f32.
absl::Status RunNorm(const Tensor& x, const Tensor* residual, const Tensor& weight, float eps, const Tensor& out,
                     const char* op) {
  if (out.dtype() != x.dtype()) {
    return absl::UnimplementedError(absl::StrCat(op, ": CUDA kernel writes out in x's dtype ", DTypeName(x.dtype()),
                                                 ", got ", DTypeName(out.dtype())));
  }
  if (x.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, op));
  const int64_t hidden = x.dim(-1);
  if (hidden > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": hidden size ", hidden, " is too large"));
  }
  const NormParams p{x.raw_data(), residual ? residual->raw_data() : nullptr, weight.raw_data(), out.raw_data(),
                     x.numel() / hidden, static_cast<int>(hidden), eps};
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto x_tag) -> absl::Status {
    using T = typename decltype(x_tag)::type;
    return DispatchSameOrF32<T>(weight.dtype(), "weight", [&](auto w_tag) -> absl::Status {
      using W = typename decltype(w_tag)::type;
      if (residual == nullptr) return LaunchNorm<T, T, W, false>(p, stream);
      return DispatchSameOrF32<T>(residual->dtype(), "residual", [&](auto r_tag) -> absl::Status {
        using R = typename decltype(r_tag)::type;
        return LaunchNorm<T, R, W, true>(p, stream);
      });
    });
  });
}

}  // namespace

absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  return RunNorm(x, nullptr, weight, eps, out, "RmsNorm");
}

absl::Status FusedAddRmsNorm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps,
                             const Tensor& out) {
  return RunNorm(x, &residual, weight, eps, out, "FusedAddRmsNorm");
}

}  // namespace seam::kernels::cuda

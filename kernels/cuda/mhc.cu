// The MHC mixes on CUDA: one thread per (row, column) of a stream, which
// loads that column of every stream, mixes in fp32 with __fmul_rn/__fadd_rn
// (no contraction into fused multiply-adds, so the order and rounding are the
// CPU reference's) and rounds once. The post mix reads all of a column's
// streams before it writes any, so it runs in place. Coefficients travel by
// value in the kernel's parameters (graph-capturable, no upload).
#include "cuda_common.cuh"
#include "mhc_ops.h"
#include "seam/kernels/mhc.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct MhcParams {
  int n = 1;
  float res[kMaxMhcStreams * kMaxMhcStreams];
  float post[kMaxMhcStreams];  // post mix; pre mix: the pre coefficients
};

template <typename R, typename Y>
__global__ void __launch_bounds__(kThreads)
    MhcPostMixKernel(R* residual, const Y* y, int64_t rows, int64_t h, MhcParams p) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * h;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / h, k = e % h;
    R* row = residual + r * p.n * h;
    float x[kMaxMhcStreams];
    for (int j = 0; j < p.n; ++j) x[j] = ToFloat(row[j * h + k]);
    const float add = ToFloat(y[r * h + k]);
    for (int i = 0; i < p.n; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < p.n; ++j) acc = __fadd_rn(acc, __fmul_rn(p.res[i * p.n + j], x[j]));
      acc = __fadd_rn(acc, __fmul_rn(p.post[i], add));
      row[i * h + k] = FromFloat<R>(acc);
    }
  }
}

template <typename R, typename O>
__global__ void __launch_bounds__(kThreads)
    MhcPreMixKernel(const R* residual, O* out, int64_t rows, int64_t h, MhcParams p) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * h;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / h, k = e % h;
    const R* row = residual + r * p.n * h;
    float acc = 0.0f;
    for (int i = 0; i < p.n; ++i) acc = __fadd_rn(acc, __fmul_rn(p.post[i], ToFloat(row[i * h + k])));
    out[r * h + k] = FromFloat<O>(acc);
  }
}

}  // namespace

absl::Status MhcPostMix(const Tensor& residual, const Tensor& y, const std::vector<float>& res,
                        const std::vector<float>& post) {
  const char* op = "MhcPostMix";
  const int64_t rows = residual.dim(0), h = y.dim(1);
  if (rows * h == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(residual, op));
  MhcParams p;
  p.n = static_cast<int>(post.size());
  for (size_t i = 0; i < res.size(); ++i) p.res[i] = res[i];
  for (size_t i = 0; i < post.size(); ++i) p.post[i] = post[i];
  const cudaStream_t stream = Stream();
  return DispatchFloat(residual.dtype(), "residual", [&](auto r_tag) -> absl::Status {
    using R = typename decltype(r_tag)::type;
    return DispatchSameOrF32<R>(y.dtype(), "y", [&](auto y_tag) -> absl::Status {
      using Y = typename decltype(y_tag)::type;
      MhcPostMixKernel<R, Y><<<GridFor(rows * h, kThreads), kThreads, 0, stream>>>(
          static_cast<R*>(residual.raw_data()), static_cast<const Y*>(y.raw_data()), rows, h, p);
      SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  });
}

absl::Status MhcPreMix(const Tensor& residual, const std::vector<float>& pre, const Tensor& out) {
  const char* op = "MhcPreMix";
  const int64_t rows = residual.dim(0), h = out.dim(1);
  if (rows * h == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(residual, op));
  MhcParams p;
  p.n = static_cast<int>(pre.size());
  for (size_t i = 0; i < pre.size(); ++i) p.post[i] = pre[i];
  const cudaStream_t stream = Stream();
  return DispatchFloat(residual.dtype(), "residual", [&](auto r_tag) -> absl::Status {
    using R = typename decltype(r_tag)::type;
    return DispatchSameOrF32<R>(out.dtype(), "out", [&](auto o_tag) -> absl::Status {
      using O = typename decltype(o_tag)::type;
      MhcPreMixKernel<R, O><<<GridFor(rows * h, kThreads), kThreads, 0, stream>>>(
          static_cast<const R*>(residual.raw_data()), static_cast<O*>(out.raw_data()), rows, h, p);
      SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  });
}

}  // namespace seam::kernels::cuda

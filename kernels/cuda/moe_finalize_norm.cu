// Fused MoE finalize + residual add + RMSNorm on CUDA: one block per row
// combines the row's K expert outputs with their scales in fp32 (k order, as
// the CPU reference), adds the residual, writes the rounded residual and the
// normalized row. The norm arithmetic is rms_norm_row.cuh's; the sum of
// squares is reduced per thread then per warp, so it may differ from the
// CPU's sequential sum in the last bits.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "rms_norm_row.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, typename R, typename W>
__global__ void __launch_bounds__(kThreads)
    MoeFinalizeNormKernel(const T* expert_out, const float* scales, R* residual, const W* weight, T* out, int k,
                          int hidden, float eps) {
  extern __shared__ float s_row[];
  __shared__ float partial[32];
  __shared__ float inv_rms[32];
  const int64_t row = blockIdx.x;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float f = 0.f;
    for (int j = 0; j < k; ++j) {
      float e[1];
      LoadFloats<T, 1>(expert_out + (row * k + j) * hidden + i, e);
      f += scales[row * k + j] * e[0];
    }
    float r[1];
    LoadFloats<R, 1>(residual + row * hidden + i, r);
    const float s[1] = {f + r[0]};
    s_row[i] = s[0];
    AddSquares(s, sum_sq);
  }
  const float inv = RowInvRms(sum_sq, hidden, eps, partial, inv_rms);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float s[1] = {s_row[i]};
    StoreFloats<R, 1>(residual + row * hidden + i, s);
    float w[1];
    LoadFloats<W, 1>(weight + i, w);
    float o[1];
    NormalizeVector(s, inv, w, o);
    StoreFloats<T, 1>(out + row * hidden + i, o);
  }
}

}  // namespace

absl::Status MoeFinalizeAddRmsNorm(const Tensor& expert_out, const Tensor& scales, const Tensor& residual,
                                   const Tensor& weight, float eps, const Tensor& out) {
  const char* op = "MoeFinalizeAddRmsNorm";
  if (out.dtype() != expert_out.dtype()) {
    return absl::UnimplementedError(absl::StrCat(op, ": CUDA kernel writes out in expert_out's dtype"));
  }
  if (out.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(expert_out, op));
  const int64_t rows = expert_out.dim(0), hidden = expert_out.dim(2);
  const int k = static_cast<int>(expert_out.dim(1));
  const size_t shared_bytes = static_cast<size_t>(hidden) * sizeof(float);
  if (shared_bytes > 48 * 1024) {
    return absl::UnimplementedError(absl::StrCat(op, ": hidden size ", hidden, " exceeds one block's row"));
  }
  const cudaStream_t stream = Stream();
  return DispatchFloat(expert_out.dtype(), "expert_out", [&](auto x_tag) -> absl::Status {
    using T = typename decltype(x_tag)::type;
    return DispatchSameOrF32<T>(weight.dtype(), "weight", [&](auto w_tag) -> absl::Status {
      using W = typename decltype(w_tag)::type;
      return DispatchSameOrF32<T>(residual.dtype(), "residual", [&](auto r_tag) -> absl::Status {
        using R = typename decltype(r_tag)::type;
        MoeFinalizeNormKernel<T, R, W><<<static_cast<unsigned int>(rows), kThreads, shared_bytes, stream>>>(
            static_cast<const T*>(expert_out.raw_data()), static_cast<const float*>(scales.raw_data()),
            static_cast<R*>(residual.raw_data()), static_cast<const W*>(weight.raw_data()),
            static_cast<T*>(out.raw_data()), k, static_cast<int>(hidden), eps);
        SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        return absl::OkStatus();
      });
    });
  });
}

}  // namespace seam::kernels::cuda

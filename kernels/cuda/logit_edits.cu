// The logit ops around a token choice on CUDA.
//
// EditLogits: one thread per edit; each (row, token) pair is edited once, so
// threads never touch the same logit. The arithmetic is the CPU reference's
// operation for operation (__fdiv_rn / __fmul_rn / __fadd_rn: no contraction
// into fused multiply-adds), so both devices edit to the same bits and a
// seeded draw after the edits chooses the same token.
//
// TokenLogProbs: one block per row: the row's max and Σ exp(x - max) by
// block reductions (fp32, another order than the CPU's sequential sum, hence
// the tolerance in ops.h), then one thread per requested token.
#include <cstdint>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kEditThreads = 256;
constexpr int kRowThreads = 256;

__global__ void EditLogitsKernel(float* __restrict__ x, int64_t rows, int64_t n, const int32_t* __restrict__ at,
                                 const float* __restrict__ by, int64_t edits) {
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= edits) return;
  const int64_t row = at[2 * e], token = at[2 * e + 1];
  if (row < 0 || row >= rows || token < 0 || token >= n) return;
  float v = x[row * n + token];
  const float repetition = by[2 * e], offset = by[2 * e + 1];
  if (repetition != 1.0f) v = v > 0.0f ? __fdiv_rn(v, repetition) : __fmul_rn(v, repetition);
  x[row * n + token] = __fadd_rn(v, offset);
}

__device__ __forceinline__ float RowMax(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kRowThreads / 32; ++w) v = fmaxf(v, scratch[w]);
  return v;
}

__device__ __forceinline__ float RowSum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0.f;
  for (int w = 0; w < kRowThreads / 32; ++w) v += scratch[w];
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    TokenLogProbsKernel(const T* __restrict__ x, int64_t n, const int32_t* __restrict__ tokens, int64_t k,
                        float* __restrict__ out) {
  __shared__ float scratch[kRowThreads / 32];
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const T* in = x + static_cast<int64_t>(blockIdx.x) * n;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads) mx = fmaxf(mx, ToFloat(in[i]));
  mx = RowMax(mx, scratch);
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads) sum += expf(ToFloat(in[i]) - mx);
  sum = RowSum(sum, scratch);
  const float lse = mx + logf(sum);
  for (int64_t j = threadIdx.x; j < k; j += kRowThreads) {
    const int32_t token = tokens[blockIdx.x * k + j];
    out[blockIdx.x * k + j] = token >= 0 && token < n ? ToFloat(in[token]) - lse : __int_as_float(0x7fc00000);
  }
}

}  // namespace

absl::Status EditLogits(const Tensor& logits, const Tensor& at, const Tensor& by) {
  const int64_t edits = at.dim(0);
  if (edits == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(logits, "EditLogits"));
  const unsigned int blocks = static_cast<unsigned int>((edits + kEditThreads - 1) / kEditThreads);
  return LaunchEnrolled({dim3(blocks), dim3(kEditThreads), 0, Stream()}, EditLogitsKernel, logits.data<float>(),
                        logits.dim(0), logits.dim(1), at.data<int32_t>(), by.data<float>(), edits);
}

absl::Status TokenLogProbs(const Tensor& logits, const Tensor& tokens, const Tensor& out) {
  const int64_t rows = logits.dim(0), n = logits.dim(1), k = tokens.dim(1);
  if (rows == 0 || k == 0) return absl::OkStatus();
  if (rows > 0x7fffffff) {
    return absl::UnimplementedError(absl::StrCat("TokenLogProbs: CUDA kernel takes fewer than 2^31 rows, got ",
                                                 ShapeToString(logits.shape())));
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(logits, "TokenLogProbs"));
  const cudaStream_t stream = Stream();
  return DispatchFloat(logits.dtype(), "logits", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return LaunchEnrolled({dim3(static_cast<unsigned int>(rows)), dim3(kRowThreads), 0, stream},
                          TokenLogProbsKernel<T>, static_cast<const T*>(logits.raw_data()), n,
                          tokens.data<int32_t>(), k, out.data<float>());
  });
}

}  // namespace seam::kernels::cuda

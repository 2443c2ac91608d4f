// HeadMatmul on CUDA: out[t, h, :] = w[h] · x[t, h, :] for all heads in one
// strided-batched cuBLASLt GEMM (batch = heads), or a simple fp32 kernel
// where cuBLASLt offers no algorithm.
//
// Design
// - Per head the problem is Matmul's (matmul.cu's header): the column-major
//   GEMM outᵀ = w[h] · xᵀ with A = w[h] (K×N, op T, ld K), B = x's head
//   slice (K×T, op N, ld = x's row stride), D = out's head slice (N×T, ld =
//   out's row stride). The batch offsets are N·K for A and the head strides
//   of x and out for B and D. Compute type CUBLAS_COMPUTE_32F (no TF32),
//   scale fp32, so each output is one rounding of an fp32 sum.
// - The thread's Matmul state (matmul_plan.cuh) lends the cuBLASLt handle
//   and the stream's workspace. Each thread keeps one plan per problem
//   (shape, strides, dtype, operand alignments, device): descriptors and the
//   heuristic's first pick, made on first use. The heuristic query is
//   host-only, so only the thread's first cuBLASLt use anywhere (the handle
//   and workspace, EnsureLt) allocates; later calls can be captured.
// - Algorithms are the heuristic's deterministic first pick (no timing), so
//   every thread and process on the same GPU kind runs the same kernel.
#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "matmul_plan.cuh"

namespace seam::kernels::cuda {
namespace {

// (device, T, H, N, K, x row/head strides, out row/head strides, dtype, alignment)
using HeadKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int>;

// Largest power of two (≤ 256) dividing every value: the alignment cuBLASLt may assume.
int CommonAlignment(std::initializer_list<uint64_t> values) {
  int align = 256;
  for (uint64_t v : values) {
    while (align > 1 && v % static_cast<uint64_t>(align) != 0) align >>= 1;
  }
  return align;
}

constexpr int kThreads = 128;

// One thread per output element; blockIdx.y is the row, blockIdx.z the head.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    HeadMatmulKernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out, int64_t n, int64_t k,
                     int64_t xs0, int64_t xs1, int64_t os0, int64_t os1) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= n) return;
  const int64_t row = blockIdx.y, head = blockIdx.z;
  const T* xr = x + row * xs0 + head * xs1;
  const T* wr = w + (head * n + col) * k;
  float acc = 0.f;
  for (int64_t i = 0; i < k; ++i) acc += ToFloat(xr[i]) * ToFloat(wr[i]);
  out[row * os0 + head * os1 + col] = FromFloat<T>(acc);
}

absl::Status LaunchKernel(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t t = x.dim(0), heads = x.dim(1), k = x.dim(2), n = w.dim(1);
  if (t > 65535 || heads > 65535) {
    return absl::UnimplementedError(
        absl::StrCat("HeadMatmul: the fallback kernel takes at most 65535 rows and heads, got ", t, " and ", heads));
  }
  const dim3 grid(static_cast<unsigned int>((n + kThreads - 1) / kThreads), static_cast<unsigned int>(t),
                  static_cast<unsigned int>(heads));
  return DispatchFloat(x.dtype(), "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    HeadMatmulKernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<const T*>(w.raw_data()), static_cast<T*>(out.raw_data()), n,
        k, x.strides()[0], x.strides()[1], out.strides()[0], out.strides()[1]);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status SetBatch(cublasLtMatrixLayout_t layout, int32_t count, int64_t stride) {
  SEAM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                               &stride, sizeof(stride)));
  return absl::OkStatus();
}

// The descriptors and the heuristic's first pick; kFallback when cuBLASLt has none.
absl::Status MakePlan(const LtState& state, const Tensor& x, const Tensor& w, const Tensor& out, int align,
                      Plan& plan) {
  const int64_t t = x.dim(0), heads = x.dim(1), k = x.dim(2), n = w.dim(1);
  const cudaDataType_t type = x.dtype() == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  SEAM_RETURN_IF_ERROR(CreateMatmulDesc(&plan.desc));
  // A row stride is only meaningful past the first row; a lone row takes the tight one.
  const int64_t ldx = t > 1 ? x.strides()[0] : k, ldo = t > 1 ? out.strides()[0] : n;
  const int64_t xs1 = heads > 1 ? x.strides()[1] : k, os1 = heads > 1 ? out.strides()[1] : n;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.a, type, k, n, k));
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.b, type, k, t, ldx));
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.d, type, n, t, ldo));
  const int32_t count = static_cast<int32_t>(heads);
  SEAM_RETURN_IF_ERROR(SetBatch(plan.a, count, n * k));
  SEAM_RETURN_IF_ERROR(SetBatch(plan.b, count, xs1));
  SEAM_RETURN_IF_ERROR(SetBatch(plan.d, count, os1));

  const uint32_t a = static_cast<uint32_t>(align);
  const uint32_t aligns[4] = {a, a, a, a};
  SEAM_ASSIGN_OR_RETURN(const std::vector<cublasLtMatmulHeuristicResult_t> results,
                        HeuristicResults(state.handle, plan.desc, plan.a, plan.b, plan.d, aligns, 1));
  const int found = static_cast<int>(results.size());
  cublasLtMatmulHeuristicResult_t result{};
  if (found > 0) result = results[0];
  plan.kernel = found > 0 ? MatmulKernel::kCublasLt : MatmulKernel::kFallback;
  plan.algo = result.algo;
  return absl::OkStatus();
}

}  // namespace

absl::Status HeadMatmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t t = x.dim(0), heads = x.dim(1), k = x.dim(2), n = w.dim(1);
  if (t == 0 || heads == 0 || n == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "HeadMatmul"));
  const cudaStream_t stream = Stream();
  constexpr int64_t kMaxDim = int64_t{1} << 31;
  if (k == 0 || t >= kMaxDim || heads >= kMaxDim || n >= kMaxDim || k >= kMaxDim) {
    return LaunchKernel(x, w, out, stream);  // an empty sum, or past cuBLASLt's 32-bit sizes
  }
  const uint64_t es = x.element_size();
  const int align = CommonAlignment({reinterpret_cast<uintptr_t>(x.raw_data()), reinterpret_cast<uintptr_t>(w.raw_data()),
                                     reinterpret_cast<uintptr_t>(out.raw_data()),
                                     static_cast<uint64_t>(heads > 1 ? x.strides()[1] : k) * es,
                                     static_cast<uint64_t>(heads > 1 ? out.strides()[1] : n) * es,
                                     static_cast<uint64_t>(n * k) * es,
                                     static_cast<uint64_t>(t > 1 ? x.strides()[0] : k) * es,
                                     static_cast<uint64_t>(t > 1 ? out.strides()[0] : n) * es});
  const HeadKey key{x.device().index, t, heads, n, k, t > 1 ? x.strides()[0] : k, heads > 1 ? x.strides()[1] : k,
                    t > 1 ? out.strides()[0] : n, heads > 1 ? out.strides()[1] : n, static_cast<int>(x.dtype()),
                    align};
  thread_local std::map<HeadKey, std::unique_ptr<Plan>> plans;
  LtState& state = StateFor(x.device().index);
  auto it = plans.find(key);
  if (it == plans.end()) {
    SEAM_RETURN_IF_ERROR(state.EnsureLt());
    auto plan = std::make_unique<Plan>();
    SEAM_RETURN_IF_ERROR(MakePlan(state, x, w, out, align, *plan));
    it = plans.emplace(key, std::move(plan)).first;
  }
  const Plan& plan = *it->second;
  if (plan.kernel != MatmulKernel::kCublasLt) return LaunchKernel(x, w, out, stream);
  const float alpha = 1.0f, beta = 0.0f;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(state.handle, plan.desc, &alpha, w.raw_data(), plan.a, x.raw_data(),
                                             plan.b, &beta, out.raw_data(), plan.d, out.raw_data(), plan.d,
                                             &plan.algo, state.WorkspaceFor(stream), kMatmulWorkspaceBytes, stream));
  return absl::OkStatus();
}

}  // namespace seam::kernels::cuda

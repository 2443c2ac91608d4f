// Matmul's per-(thread, device) state and per-problem plans (matmul_plan.cu);
// internal to kernels/cuda. A plan is the kernel chosen for one problem
// (M, N, K, dtypes, operand alignments): cuBLASLt with its descriptors and
// algorithm, the GEMV kernel, or the fallback kernel. The choice is made
// once per process, GPU kind (compute capability, SM count) and tuning
// setting, by the first thread to meet the problem, and every other thread
// adopts it; each thread's plan holds its own descriptors and never changes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "seam/core/tensor.h"
#include "seam/kernels/matmul_tuning.h"

namespace seam::kernels::cuda {

absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file, int line);

#define SEAM_CUBLAS_STATUS(call) ::seam::kernels::cuda::CublasStatus((call), #call, __FILE__, __LINE__)
#define SEAM_CUBLAS_RETURN_IF_ERROR(call)                     \
  do {                                                        \
    ::absl::Status _seam_cublas_s = SEAM_CUBLAS_STATUS(call); \
    if (!_seam_cublas_s.ok()) return _seam_cublas_s;          \
  } while (0)

constexpr size_t kMatmulWorkspaceBytes = size_t{32} << 20;

struct PlanKey {
  int64_t m, n, k;
  uint8_t x_dtype, w_dtype, out_dtype;
  uint16_t align_x, align_w, align_out;
  bool operator==(const PlanKey& o) const {
    return m == o.m && n == o.n && k == o.k && x_dtype == o.x_dtype && w_dtype == o.w_dtype &&
           out_dtype == o.out_dtype && align_x == o.align_x && align_w == o.align_w && align_out == o.align_out;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const;
};

// The key of Matmul(x, w, out).
PlanKey KeyOf(const Tensor& x, const Tensor& w, const Tensor& out);

enum class MatmulKernel : uint8_t { kCublasLt, kGemv, kMixed, kFallback };

struct Plan {
  MatmulKernel kernel = MatmulKernel::kCublasLt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  MatmulChoice choice;  // what MatmulChoices reports
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan();
};

// The per-(thread, device) cuBLASLt handle, workspaces, timing events and
// plans. Creating the state makes no CUDA call; the handle and the default
// workspace come with the first cuBLASLt plan (EnsureLt), so a thread whose
// problems all take the GEMV never allocates.
struct LtState {
  int device = -1;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  cudaEvent_t events[2] = {nullptr, nullptr};
  // Streams given a workspace of their own (UseOwnMatmulWorkspace).
  std::unordered_map<void*, void*> stream_workspaces;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  std::vector<const Plan*> order;  // first-seen order
  void* WorkspaceFor(void* stream) const {
    auto it = stream_workspaces.find(stream);
    return it == stream_workspaces.end() ? workspace : it->second;
  }
  absl::Status EnsureLt();
  ~LtState();
};

// The calling thread's state for `device` (created on first use, no CUDA call).
LtState& StateFor(int device);

// The plan of Matmul(x, w, out) (key: KeyOf), made on the thread's first use
// from the process's decision, which the first thread to meet the problem
// makes (matmul.cu's header) and may time candidates for on `stream`
// (synchronising with it) unless the stream is being captured.
// The descriptor of the column-major GEMM outᵀ = w · xᵀ every seam matmul
// runs (fp32 compute and scale, A = w transposed, B = x as is).
absl::Status CreateMatmulDesc(cublasLtMatmulDesc_t* desc);

// Up to `count` heuristic results for a matmul of these descriptors (C is
// D) within kMatmulWorkspaceBytes and the operands' alignments in bytes (A,
// B, C, D); empty when cuBLASLt has no algorithm for them.
absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> HeuristicResults(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t d, const uint32_t (&aligns)[4], int count);

absl::StatusOr<const Plan*> PlanFor(LtState& state, const PlanKey& key, const Tensor& x, const Tensor& w,
                                    const Tensor& out, cudaStream_t stream);

}  // namespace seam::kernels::cuda

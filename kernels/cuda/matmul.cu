// Matmul on CUDA: out[M, N] = x[M, K] · w[N, K]ᵀ through cuBLASLt.
//
// Design
// - Row-major out[M, N] is column-major outᵀ[N, M], so the call is the
//   column-major GEMM outᵀ = w · xᵀ: A = w (K×N column-major, op T, ld K),
//   B = x (K×M column-major, op N, ld K), D = out (N×M, ld N).
// - Compute type CUBLAS_COMPUTE_32F (fp32 accumulation, no TF32 for f32
//   inputs, so f32 results match the full-fp32 CPU reference), scale fp32.
// - One cuBLASLt handle per (thread, device), created on first use together
//   with a fixed 32 MiB workspace (streams that run matmuls at the same time
//   as another stream of the thread get their own: UseOwnMatmulWorkspace). The first call on a thread/device therefore
//   allocates: run one matmul (warm-up) before capturing a CUDA graph. Later
//   calls never allocate nor synchronise, so they can be captured.
// - The descriptors and the heuristic's algorithm are cached per problem
//   (M, N, K, dtypes, pointer alignments) in the same per-thread state, so a
//   decode step does no heuristic query after its first occurrence.
// - Dtype pairs cuBLASLt has no kernel for (mixed x/w dtypes, f32 inputs with a
//   16-bit out, bf16 inputs with f16 out, ...) run a simple tiled fp32 kernel
//   instead: correct for every pairing, not tuned for speed.
// - Decode-sized problems (M ≤ kGemvMaxRows) take a hand-written GEMV kernel
//   instead of cuBLASLt, whose heuristic picks split-K kernels with an extra
//   reduction there (7-10 µs for a 1024×1024 bf16 weight that takes ~0.5 µs
//   to read). The weight read dominates and one read of w serves all M rows,
//   so the kernel streams w once: each warp owns kGemvRowsPerWarp output
//   features, its lanes load 16-byte slices of those weight rows (kGemvUnroll
//   slices per row in flight per lane), multiply them with the matching
//   slices of every x row (x is tiny: read through the read-only cache),
//   accumulate in fp32 and reduce by warp shuffles. Conditions: x and w of
//   one dtype, K a multiple of the 16-byte vector width, x and w 16-byte
//   aligned; for very wide outputs (N > kGemvWideN, the lm_head) only
//   M ≤ kGemvWideMaxRows, where the per-weight arithmetic (M FMAs plus
//   conversions) stays well under the weight's streaming time; and from
//   kGemvAnyWeightRows + 1 rows only weights under kGemvLargeWeightBytes:
//   on an H200 cuBLASLt streamed the 33-262 MB weights of a hidden-4096
//   model faster from 3-4 rows on (at 8 rows 1.5x faster for the
//   attention's and the down projection's; 2026-12-01-h200-gemv-batch1/
//   run5-matmul-choice), while its fixed cost still dominates small
//   weights. Everything else goes to cuBLASLt. The GEMV needs no handle nor workspace, so it can
//   be captured even as the first call of a thread.
#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "warp_sum_store.cuh"

namespace seam::kernels::cuda {
namespace {

// ---- cuBLAS status wrapping ------------------------------------------------------

absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = status == CUBLAS_STATUS_ALLOC_FAILED      ? absl::StatusCode::kResourceExhausted
                                : status == CUBLAS_STATUS_NOT_SUPPORTED   ? absl::StatusCode::kUnimplemented
                                : status == CUBLAS_STATUS_NOT_INITIALIZED ? absl::StatusCode::kUnavailable
                                                                          : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(call, " failed at ", file, ":", line, ": ", cublasLtGetStatusName(status),
                                         " (", cublasLtGetStatusString(status), ")"));
}

#define SEAM_CUBLAS_STATUS(call) CublasStatus((call), #call, __FILE__, __LINE__)
#define SEAM_CUBLAS_RETURN_IF_ERROR(call)                    \
  do {                                                       \
    ::absl::Status _seam_cublas_s = SEAM_CUBLAS_STATUS(call); \
    if (!_seam_cublas_s.ok()) return _seam_cublas_s;         \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// ---- fallback kernel ----------------------------------------------------------------

constexpr int kTile = 16;

// out[m, n] = Σ_k x[m, k] · w[n, k] in fp32; one thread per output, 16×16
// tiles of x and w staged in shared memory. blockIdx.x covers N, blockIdx.y M.
template <typename X, typename W, typename O>
__global__ void __launch_bounds__(kTile* kTile)
    FallbackMatmulKernel(const X* __restrict__ x, const W* __restrict__ w, O* __restrict__ out, int64_t m,
                         int64_t n, int64_t k) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + ty;  // of x / out
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;  // of w / out
  const int64_t w_row = static_cast<int64_t>(blockIdx.x) * kTile + ty;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    const int64_t kk = k0 + tx;
    xs[ty][tx] = row < m && kk < k ? ToFloat(x[row * k + kk]) : 0.f;
    ws[ty][tx] = w_row < n && kk < k ? ToFloat(w[w_row * k + kk]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; ++j) acc += xs[ty][j] * ws[tx][j];
    __syncthreads();
  }
  if (row < m && col < n) out[row * n + col] = FromFloat<O>(acc);
}

absl::Status LaunchFallback(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if ((m + kTile - 1) / kTile > 65535) {
    return absl::UnimplementedError(absl::StrCat("Matmul: the fallback kernel takes at most ", 65535 * kTile,
                                                 " rows, got ", m));
  }
  const dim3 grid(static_cast<unsigned int>((n + kTile - 1) / kTile), static_cast<unsigned int>((m + kTile - 1) / kTile));
  const dim3 block(kTile, kTile);
  return DispatchFloat(x.dtype(), "x", [&](auto xt) -> absl::Status {
    using X = typename decltype(xt)::type;
    return DispatchFloat(w.dtype(), "w", [&](auto wt) -> absl::Status {
      using W = typename decltype(wt)::type;
      return DispatchFloat(out.dtype(), "out", [&](auto ot) -> absl::Status {
        using O = typename decltype(ot)::type;
        FallbackMatmulKernel<X, W, O><<<grid, block, 0, stream>>>(static_cast<const X*>(x.raw_data()),
                                                                  static_cast<const W*>(w.raw_data()),
                                                                  static_cast<O*>(out.raw_data()), m, n, k);
        SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        return absl::OkStatus();
      });
    });
  });
}

// ---- small-M kernel (GEMV) --------------------------------------------------------------

constexpr int kGemvMaxRows = 8;         // largest M taking the GEMV
constexpr int kGemvWarps = 4;           // warps per block
constexpr int kGemvRowsPerWarp = 2;     // output features per warp (share each x load)
constexpr int kGemvUnroll = 4;          // 16-byte weight loads in flight per lane and feature
constexpr int64_t kGemvWideN = 16384;   // beyond this N ...
constexpr int kGemvWideMaxRows = 4;     // ... only M up to this takes the GEMV
constexpr int kGemvAnyWeightRows = 2;   // beyond this M ...
constexpr int64_t kGemvLargeWeightBytes = int64_t{16} << 20;  // ... weights this large go to cuBLASLt

// acc[r][m] += w_r[vector i] · x_m[vector i] for the vectors `wv` of the warp's features.
template <typename T, int M, int R>
__device__ __forceinline__ void GemvStep(const uint4 (&wv)[R], const uint4* __restrict__ x, int64_t kv, int64_t i,
                                         float (&acc)[R][M]) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  float wf[R][V];
#pragma unroll
  for (int r = 0; r < R; ++r) WidenVec<T>(wv[r], wf[r]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[V];
    WidenVec<T>(__ldg(x + m * kv + i), xf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
    }
  }
}

// wv[u][r] = the lane's 16-byte vector u of the chunk at `base` (in vectors) of feature r's weight row.
template <int U, int R>
__device__ __forceinline__ void LoadChunk(uint4 (&wv)[U][R], const uint4* const* wrow, int64_t base, int lane) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int r = 0; r < R; ++r) wv[u][r] = __ldcs(wrow[r] + base + 32 * u + lane);
  }
}

// out[m, f] = Σ_k x[m, k] · w[f, k] for m < M, warp w taking features
// f = R·w .. R·w + R - 1. x, w: 16-byte aligned, k a multiple of the vector width.
template <typename T, typename O, int M>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(const T* __restrict__ x, const T* __restrict__ w, O* __restrict__ out, int64_t n, int64_t k) {
  constexpr int R = kGemvRowsPerWarp;
  constexpr int U = kGemvUnroll;
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32) * R;
  if (first >= n) return;  // warp-uniform; no block-wide synchronisation follows
  const int64_t kv = k / V;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t f = first + r < n ? first + r : n - 1;  // past the end: reread the last row, not written
    wrow[r] = reinterpret_cast<const uint4*>(w + f * k);
  }
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;
  }
  int64_t base = 0;
  if constexpr (M == 1) {
    // One row: the first chunk's loads are issued ahead of the loop. On an
    // H200 this measured 7% faster per batch-1 decode step of an 8-layer
    // hidden-4096 bf16 Qwen3 (bench/results/2026-12-01-h200-gemv-batch1);
    // at M = 2 it measured slower, so more rows keep the plain loop.
    uint4 wv[U][R];
    if (32 * U <= kv) LoadChunk<U, R>(wv, wrow, 0, lane);
    for (; base + 32 * U <= kv; base += 32 * U) {
      if (base > 0) LoadChunk<U, R>(wv, wrow, base, lane);
#pragma unroll
      for (int u = 0; u < U; ++u) GemvStep<T, M, R>(wv[u], xv, kv, base + 32 * u + lane, acc);
    }
  } else {
    for (; base + 32 * U <= kv; base += 32 * U) {
      uint4 wv[U][R];
      LoadChunk<U, R>(wv, wrow, base, lane);
#pragma unroll
      for (int u = 0; u < U; ++u) GemvStep<T, M, R>(wv[u], xv, kv, base + 32 * u + lane, acc);
    }
  }
  for (int64_t i = base + lane; i < kv; i += 32) {
    uint4 wv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wv[r] = __ldcs(wrow[r] + i);
    GemvStep<T, M, R>(wv, xv, kv, i, acc);
  }
  int64_t out_row[M];
#pragma unroll
  for (int m = 0; m < M; ++m) out_row[m] = m;
  WarpSumAndStore<O, M, R>(acc, out_row, first, n, lane, out);
}

// True when Matmul takes the GEMV kernel; see the header.
bool UseGemv(const Tensor& x, const Tensor& w, int64_t m, int64_t n, int64_t k) {
  if (m > kGemvMaxRows || x.dtype() != w.dtype()) return false;
  if (n > kGemvWideN && m > kGemvWideMaxRows) return false;
  if (m > kGemvAnyWeightRows && static_cast<int64_t>(w.nbytes()) >= kGemvLargeWeightBytes) return false;
  const int64_t vec = x.dtype() == DType::kF32 ? 4 : 8;
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kBF16 && x.dtype() != DType::kF16) return false;
  return k % vec == 0 && reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.raw_data()) % 16 == 0;
}

template <typename T, typename O, int M>
void LaunchGemvRows(const T* x, const T* w, O* out, int64_t n, int64_t k, cudaStream_t stream) {
  constexpr int64_t kPerBlock = int64_t{kGemvWarps} * kGemvRowsPerWarp;
  const unsigned int blocks = static_cast<unsigned int>((n + kPerBlock - 1) / kPerBlock);
  GemvKernel<T, O, M><<<blocks, kGemvWarps * 32, 0, stream>>>(x, w, out, n, k);
}

absl::Status LaunchGemv(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  return DispatchFloat(x.dtype(), "x", [&](auto xt) -> absl::Status {
    using T = typename decltype(xt)::type;
    return DispatchFloat(out.dtype(), "out", [&](auto ot) -> absl::Status {
      using O = typename decltype(ot)::type;
      const T* xp = static_cast<const T*>(x.raw_data());
      const T* wp = static_cast<const T*>(w.raw_data());
      O* op = static_cast<O*>(out.raw_data());
      switch (m) {
        case 1: LaunchGemvRows<T, O, 1>(xp, wp, op, n, k, stream); break;
        case 2: LaunchGemvRows<T, O, 2>(xp, wp, op, n, k, stream); break;
        case 3: LaunchGemvRows<T, O, 3>(xp, wp, op, n, k, stream); break;
        case 4: LaunchGemvRows<T, O, 4>(xp, wp, op, n, k, stream); break;
        case 5: LaunchGemvRows<T, O, 5>(xp, wp, op, n, k, stream); break;
        case 6: LaunchGemvRows<T, O, 6>(xp, wp, op, n, k, stream); break;
        case 7: LaunchGemvRows<T, O, 7>(xp, wp, op, n, k, stream); break;
        case 8: LaunchGemvRows<T, O, 8>(xp, wp, op, n, k, stream); break;
        default:
          return absl::InternalError(absl::StrCat("Matmul: GEMV launched for M=", m));
      }
      SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  });
}

// ---- cuBLASLt state -------------------------------------------------------------------

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

// Largest power of two (≤ 256) dividing the address: the alignment cuBLASLt may assume.
uint32_t Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align >>= 1;
  return align;
}

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
  size_t operator()(const PlanKey& key) const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
    mix(static_cast<uint64_t>(key.m));
    mix(static_cast<uint64_t>(key.n));
    mix(static_cast<uint64_t>(key.k));
    mix(key.x_dtype | (key.w_dtype << 8) | (key.out_dtype << 16));
    mix(key.align_x | (uint64_t{key.align_w} << 16) | (uint64_t{key.align_out} << 32));
    return static_cast<size_t>(h);
  }
};

// Descriptors and algorithm of one problem; `fallback` when cuBLASLt has no algorithm.
struct Plan {
  bool fallback = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// The per-(thread, device) handle, workspace and plan cache.
struct LtState {
  int device = -1;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  // Streams given a workspace of their own (UseOwnMatmulWorkspace).
  std::unordered_map<void*, void*> stream_workspaces;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  void* WorkspaceFor(void* stream) const {
    auto it = stream_workspaces.find(stream);
    return it == stream_workspaces.end() ? workspace : it->second;
  }
  ~LtState() {
    plans.clear();
    // Errors are ignored: at process exit the CUDA runtime may already be gone.
    int previous = -1;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) {
      if (workspace) cudaFree(workspace);
      for (auto& [stream, w] : stream_workspaces) cudaFree(w);
      cudaSetDevice(previous);
    }
    if (handle) cublasLtDestroy(handle);
  }
};

absl::StatusOr<LtState*> StateFor(int device) {
  thread_local std::unordered_map<int, std::unique_ptr<LtState>> states;
  auto it = states.find(device);
  if (it != states.end()) return it->second.get();
  auto state = std::make_unique<LtState>();
  state->device = device;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&state->handle));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&state->workspace, kWorkspaceBytes));
  LtState* raw = state.get();
  states.emplace(device, std::move(state));
  return raw;
}

absl::StatusOr<Plan*> PlanFor(LtState& state, const PlanKey& key, DType x_dtype, DType w_dtype, DType out_dtype) {
  auto it = state.plans.find(key);
  if (it != state.plans.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  // cuBLASLt multiplies two operands of one dtype; other pairings use the fallback.
  if (x_dtype != w_dtype) {
    plan->fallback = true;
  } else {
    const cudaDataType_t ab = CudaType(w_dtype), cd = CudaType(out_dtype);
    SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    SEAM_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    SEAM_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    const uint64_t m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n),
                   k = static_cast<uint64_t>(key.k);
    SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->a, ab, k, n, static_cast<int64_t>(k)));
    SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->b, ab, k, m, static_cast<int64_t>(k)));
    SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->d, cd, n, m, static_cast<int64_t>(n)));

    // The preference lives in a unique_ptr so every early return destroys it.
    cublasLtMatmulPreference_t raw_pref = nullptr;
    SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&raw_pref));
    const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)> pref(
        raw_pref, cublasLtMatmulPreferenceDestroy);
    const uint64_t workspace = kWorkspaceBytes;
    SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    const uint32_t aligns[4] = {key.align_w, key.align_x, key.align_out, key.align_out};  // A, B, C, D
    const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      SEAM_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulPreferenceSetAttribute(raw_pref, align_attrs[i], &aligns[i], sizeof(aligns[i])));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(state.handle, plan->desc, plan->a, plan->b, plan->d,
                                                            plan->d, raw_pref, 1, &result, &found);
    // NOT_SUPPORTED / INVALID_VALUE: no algorithm for this dtype pairing; use the fallback.
    if (h == CUBLAS_STATUS_NOT_SUPPORTED || h == CUBLAS_STATUS_INVALID_VALUE) {
      found = 0;
    } else {
      SEAM_CUBLAS_RETURN_IF_ERROR(h);
    }
    if (found > 0) {
      plan->algo = result.algo;
    } else {
      plan->fallback = true;
    }
  }
  Plan* raw = plan.get();
  state.plans.emplace(key, std::move(plan));
  return raw;
}

}  // namespace

absl::Status UseOwnMatmulWorkspace(void* stream) {
  int device = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEAM_ASSIGN_OR_RETURN(LtState * state, StateFor(device));
  if (state->stream_workspaces.count(stream) != 0) return absl::OkStatus();
  void* w = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&w, kWorkspaceBytes));
  state->stream_workspaces.emplace(stream, w);
  return absl::OkStatus();
}

absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "Matmul"));
  SEAM_RETURN_IF_ERROR(DispatchFloat(x.dtype(), "x", [](auto) { return absl::OkStatus(); }));
  SEAM_RETURN_IF_ERROR(DispatchFloat(w.dtype(), "w", [](auto) { return absl::OkStatus(); }));
  SEAM_RETURN_IF_ERROR(DispatchFloat(out.dtype(), "out", [](auto) { return absl::OkStatus(); }));
  const cudaStream_t stream = Stream();
  if (k == 0) {  // empty sum: zeros (all-zero bytes in every float dtype)
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), stream));
    return absl::OkStatus();
  }
  constexpr int64_t kMaxDim = int64_t{1} << 31;
  if (m >= kMaxDim || n >= kMaxDim || k >= kMaxDim) {
    return absl::UnimplementedError(absl::StrCat("Matmul: dimensions must be below 2^31, got M=", m, " N=", n,
                                                 " K=", k));
  }

  if (UseGemv(x, w, m, n, k)) return LaunchGemv(x, w, out, stream);

  const int device = x.device().index;
  SEAM_ASSIGN_OR_RETURN(LtState * state, StateFor(device));
  const PlanKey key{m,
                    n,
                    k,
                    static_cast<uint8_t>(x.dtype()),
                    static_cast<uint8_t>(w.dtype()),
                    static_cast<uint8_t>(out.dtype()),
                    static_cast<uint16_t>(Alignment(x.raw_data())),
                    static_cast<uint16_t>(Alignment(w.raw_data())),
                    static_cast<uint16_t>(Alignment(out.raw_data()))};
  SEAM_ASSIGN_OR_RETURN(Plan * plan, PlanFor(*state, key, x.dtype(), w.dtype(), out.dtype()));
  if (plan->fallback) return LaunchFallback(x, w, out, stream);

  const float alpha = 1.0f, beta = 0.0f;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(state->handle, plan->desc, &alpha, w.raw_data(), plan->a, x.raw_data(),
                                             plan->b, &beta, out.raw_data(), plan->d, out.raw_data(), plan->d,
                                             &plan->algo, state->WorkspaceFor(stream), kWorkspaceBytes, stream));
  return absl::OkStatus();
}

}  // namespace seam::kernels::cuda

// Matmul's plans: the kernel of each problem, chosen once per process and
// kind of GPU, and each thread's descriptors for it (matmul_plan.cuh; the
// choice is described in matmul.cu's header).
#include "matmul_plan.cuh"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda_common.cuh"
#include "matmul_gemv.cuh"
#include "matmul_mixed.cuh"

namespace seam::kernels::cuda {

absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = status == CUBLAS_STATUS_ALLOC_FAILED      ? absl::StatusCode::kResourceExhausted
                                : status == CUBLAS_STATUS_NOT_SUPPORTED   ? absl::StatusCode::kUnimplemented
                                : status == CUBLAS_STATUS_NOT_INITIALIZED ? absl::StatusCode::kUnavailable
                                                                          : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(call, " failed at ", file, ":", line, ": ", cublasLtGetStatusName(status),
                                         " (", cublasLtGetStatusString(status), ")"));
}

namespace {

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
uint16_t Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint16_t align = 256;
  while (align > 1 && a % align != 0) align >>= 1;
  return align;
}

// True unless `stream` is known not to be capturing (an error counts as capturing: time nothing then).
bool Capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

template <typename V>
V ConfigOf(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  V v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS) return V{};
  return v;
}

std::string Describe(const cublasLtMatmulAlgo_t& algo) {
  return absl::StrCat("algo ", ConfigOf<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID), " tile ",
                      ConfigOf<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID), " stages ",
                      ConfigOf<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), " splitk ",
                      ConfigOf<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), " reduction ",
                      ConfigOf<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), " swizzle ",
                      ConfigOf<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), " custom ",
                      ConfigOf<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), " cluster ",
                      ConfigOf<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

// The descriptors of the column-major GEMM outᵀ = w · xᵀ (matmul.cu's header).
absl::Status CreateDescriptors(Plan& plan, const PlanKey& key, DType w_dtype, DType out_dtype) {
  const cudaDataType_t ab = CudaType(w_dtype), cd = CudaType(out_dtype);
  SEAM_RETURN_IF_ERROR(CreateMatmulDesc(&plan.desc));
  const uint64_t m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n), k = static_cast<uint64_t>(key.k);
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.a, ab, k, n, static_cast<int64_t>(k)));
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.b, ab, k, m, static_cast<int64_t>(k)));
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan.d, cd, n, m, static_cast<int64_t>(n)));
  return absl::OkStatus();
}

// Up to `count` heuristic results for the plan's descriptors; empty when
// cuBLASLt has no algorithm for the dtype pairing.
absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> Heuristic(const LtState& state, const Plan& plan,
                                                                       const PlanKey& key, int count) {
  const uint32_t aligns[4] = {key.align_w, key.align_x, key.align_out, key.align_out};  // A, B, C, D
  return HeuristicResults(state.handle, plan.desc, plan.a, plan.b, plan.d, aligns, count);
}

// The algorithm with K split `splits` ways, when it supports that within the workspace.
bool SplitK(const LtState& state, const Plan& plan, cublasLtMatmulAlgo_t algo, int32_t splits,
            cublasLtMatmulAlgo_t* variant) {
  int32_t support = 0;
  uint32_t schemes = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &support, sizeof(support),
                                        &written) != CUBLAS_STATUS_SUCCESS ||
      support == 0 ||
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes),
                                        &written) != CUBLAS_STATUS_SUCCESS) {
    return false;
  }
  // fp32 partial sums in the workspace where offered, else in the output's type.
  const uint32_t scheme = (schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                          : (schemes & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) ? CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE
                                                                              : CUBLASLT_REDUCTION_SCHEME_NONE;
  if (scheme == CUBLASLT_REDUCTION_SCHEME_NONE) return false;
  if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits)) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme)) !=
          CUBLAS_STATUS_SUCCESS) {
    return false;
  }
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(state.handle, plan.desc, plan.a, plan.b, plan.d, plan.d, &algo, &check) !=
          CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > kMatmulWorkspaceBytes) {
    return false;
  }
  *variant = algo;
  return true;
}

struct Candidate {
  MatmulKernel kernel;
  cublasLtMatmulAlgo_t algo;
};

absl::Status Run(LtState& state, const Plan& plan, const Candidate& c, const Tensor& x, const Tensor& w,
                 const Tensor& out, cudaStream_t stream) {
  if (c.kernel == MatmulKernel::kGemv) return LaunchGemv(x, w, out, stream);
  const float alpha = 1.0f, beta = 0.0f;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(state.handle, plan.desc, &alpha, w.raw_data(), plan.a, x.raw_data(),
                                             plan.b, &beta, out.raw_data(), plan.d, out.raw_data(), plan.d, &c.algo,
                                             state.WorkspaceFor(stream), kMatmulWorkspaceBytes, stream));
  return absl::OkStatus();
}

// Median microseconds of `runs` timed runs after one untimed run; an error
// when the candidate does not run (it is then skipped).
absl::StatusOr<double> Time(LtState& state, const Plan& plan, const Candidate& c, const Tensor& x, const Tensor& w,
                            const Tensor& out, cudaStream_t stream, int runs) {
  for (cudaEvent_t& e : state.events) {
    if (e == nullptr) SEAM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  }
  SEAM_RETURN_IF_ERROR(Run(state, plan, c, x, w, out, stream));
  std::vector<float> ms;
  for (int r = 0; r < runs; ++r) {
    SEAM_CUDA_RETURN_IF_ERROR(cudaEventRecord(state.events[0], stream));
    SEAM_RETURN_IF_ERROR(Run(state, plan, c, x, w, out, stream));
    SEAM_CUDA_RETURN_IF_ERROR(cudaEventRecord(state.events[1], stream));
    SEAM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(state.events[1]));
    float t = 0;
    SEAM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, state.events[0], state.events[1]));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return 1e3 * ms[ms.size() / 2];
}

// Times `candidates` (the heuristic's first pick first) and keeps the fastest in `plan`.
absl::Status Choose(LtState& state, Plan& plan, const std::vector<Candidate>& candidates, const Tensor& x,
                    const Tensor& w, const Tensor& out, cudaStream_t stream, int runs) {
  int best = -1, timed = 0;
  double best_us = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    absl::StatusOr<double> us = Time(state, plan, candidates[i], x, w, out, stream, runs);
    if (!us.ok()) {
      cudaGetLastError();  // a candidate that does not run is skipped
      continue;
    }
    ++timed;
    if (i == 0) plan.choice.first_us = *us;
    if (best < 0 || *us < best_us) best = static_cast<int>(i), best_us = *us;
  }
  if (best < 0) return absl::InternalError("Matmul: no candidate kernel ran");
  const Candidate& c = candidates[static_cast<size_t>(best)];
  plan.kernel = c.kernel;
  plan.algo = c.algo;
  plan.choice.timed = timed;
  plan.choice.kept = best;
  plan.choice.kept_us = best_us;
  return absl::OkStatus();
}

void SetKernel(Plan& plan, MatmulKernel kernel) {
  plan.kernel = kernel;
  plan.choice.kernel = kernel == MatmulKernel::kGemv       ? "gemv"
                       : kernel == MatmulKernel::kMixed    ? "mixed"
                       : kernel == MatmulKernel::kFallback ? "fallback"
                                                           : "cublaslt";
  if (kernel == MatmulKernel::kCublasLt) plan.choice.algorithm = Describe(plan.algo);
}

absl::Status MakePlan(LtState& state, Plan& plan, const PlanKey& key, const MatmulTuning& tuning, const Tensor& x,
                      const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t m = key.m, n = key.n, k = key.k;
  const bool gemv = GemvEligible(x, w, m, k);
  // Decisively faster there (matmul_gemv.cu's header); no state needed, so capturable as a first call.
  if (gemv && m <= kGemvAnyWeightRows) {
    SetKernel(plan, MatmulKernel::kGemv);
    return absl::OkStatus();
  }
  const bool timed = tuning.candidates > 1 && m <= tuning.max_tuned_rows && !Capturing(stream);
  if (!timed && gemv && GemvByRule(x, w, m, n, k)) {
    SetKernel(plan, MatmulKernel::kGemv);
    return absl::OkStatus();
  }
  // cuBLASLt multiplies two operands of one dtype; other pairings use the
  // mixed kernel at decode-sized M, else the fallback.
  if (x.dtype() != w.dtype()) {
    SetKernel(plan, MixedEligible(x, w, m, k) ? MatmulKernel::kMixed : MatmulKernel::kFallback);
    return absl::OkStatus();
  }
  SEAM_RETURN_IF_ERROR(state.EnsureLt());
  SEAM_RETURN_IF_ERROR(CreateDescriptors(plan, key, w.dtype(), out.dtype()));
  SEAM_ASSIGN_OR_RETURN(std::vector<cublasLtMatmulHeuristicResult_t> results,
                        Heuristic(state, plan, key, timed ? tuning.candidates : 1));
  if (results.empty()) {
    SetKernel(plan, gemv ? MatmulKernel::kGemv : MatmulKernel::kFallback);
    return absl::OkStatus();
  }
  plan.algo = results[0].algo;
  if (!timed) {
    SetKernel(plan, MatmulKernel::kCublasLt);
    return absl::OkStatus();
  }
  std::vector<Candidate> candidates;
  for (const cublasLtMatmulHeuristicResult_t& r : results) candidates.push_back({MatmulKernel::kCublasLt, r.algo});
  for (int32_t splits : {2, 3, 4, 8}) {
    cublasLtMatmulAlgo_t variant;
    if (SplitK(state, plan, results[0].algo, splits, &variant)) candidates.push_back({MatmulKernel::kCublasLt, variant});
  }
  if (gemv) candidates.push_back({MatmulKernel::kGemv, {}});
  SEAM_RETURN_IF_ERROR(Choose(state, plan, candidates, x, w, out, stream, tuning.timed_runs));
  SetKernel(plan, plan.kernel);
  return absl::OkStatus();
}

// ---- process-wide decisions ---------------------------------------------------------

// What one problem runs, shared by every thread of the process on the same
// kind of GPU under the same tuning setting, so that threads (TP ranks,
// eager and graph callers) run the same kernel for the same problem.
struct Decision {
  MatmulKernel kernel;
  cublasLtMatmulAlgo_t algo;
  MatmulChoice choice;
};

class Decisions {
 public:
  // The published decision of (scope, key), if any.
  bool Find(const std::string& scope, const PlanKey& key, Decision* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto s = by_scope_.find(scope);
    if (s == by_scope_.end()) return false;
    auto it = s->second.find(key);
    if (it == s->second.end()) return false;
    *out = it->second;
    return true;
  }
  // Publishes `d` unless a decision exists (another thread timed the same
  // problem meanwhile); returns the one that holds.
  Decision Publish(const std::string& scope, const PlanKey& key, const Decision& d) {
    std::lock_guard<std::mutex> lock(mu_);
    return by_scope_[scope].emplace(key, d).first->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::unordered_map<PlanKey, Decision, PlanKeyHash>> by_scope_;
};

Decisions& TheDecisions() {
  static Decisions* decisions = new Decisions();  // never destroyed: threads may outlive static destruction
  return *decisions;
}

// The GPU kind (compute capability, SM count) and the tuning setting a decision holds for.
std::string ScopeOf(int device, const MatmulTuning& tuning) {
  int major = 0, minor = 0, sms = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return absl::StrCat("device ", device, " c", tuning.candidates, " r", tuning.timed_runs, " m",
                        tuning.max_tuned_rows);
  }
  return absl::StrCat("sm", major, minor, " x", sms, " c", tuning.candidates, " r", tuning.timed_runs, " m",
                      tuning.max_tuned_rows);
}

// Makes `plan` run decision `d` (descriptors created when it is cuBLASLt's).
absl::Status Adopt(LtState& state, Plan& plan, const PlanKey& key, const Decision& d, DType w_dtype, DType out_dtype) {
  if (d.kernel == MatmulKernel::kCublasLt && plan.desc == nullptr) {
    SEAM_RETURN_IF_ERROR(state.EnsureLt());
    SEAM_RETURN_IF_ERROR(CreateDescriptors(plan, key, w_dtype, out_dtype));
  }
  plan.kernel = d.kernel;
  plan.algo = d.algo;
  plan.choice = d.choice;
  return absl::OkStatus();
}

}  // namespace

size_t PlanKeyHash::operator()(const PlanKey& key) const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  mix(static_cast<uint64_t>(key.m));
  mix(static_cast<uint64_t>(key.n));
  mix(static_cast<uint64_t>(key.k));
  mix(key.x_dtype | (key.w_dtype << 8) | (key.out_dtype << 16));
  mix(key.align_x | (uint64_t{key.align_w} << 16) | (uint64_t{key.align_out} << 32));
  return static_cast<size_t>(h);
}

PlanKey KeyOf(const Tensor& x, const Tensor& w, const Tensor& out) {
  return PlanKey{x.dim(0),
                 w.dim(0),
                 x.dim(1),
                 static_cast<uint8_t>(x.dtype()),
                 static_cast<uint8_t>(w.dtype()),
                 static_cast<uint8_t>(out.dtype()),
                 Alignment(x.raw_data()),
                 Alignment(w.raw_data()),
                 Alignment(out.raw_data())};
}

Plan::~Plan() {
  if (d) cublasLtMatrixLayoutDestroy(d);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

absl::Status LtState::EnsureLt() {
  if (handle == nullptr) SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  if (workspace == nullptr) SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&workspace, kMatmulWorkspaceBytes));
  return absl::OkStatus();
}

LtState::~LtState() {
  order.clear();
  plans.clear();
  // Errors are ignored: at process exit the CUDA runtime may already be gone.
  int previous = -1;
  if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) {
    if (workspace) cudaFree(workspace);
    for (auto& [stream, w] : stream_workspaces) cudaFree(w);
    for (cudaEvent_t e : events) {
      if (e) cudaEventDestroy(e);
    }
    cudaSetDevice(previous);
  }
  if (handle) cublasLtDestroy(handle);
}

LtState& StateFor(int device) {
  thread_local std::unordered_map<int, std::unique_ptr<LtState>> states;
  std::unique_ptr<LtState>& state = states[device];
  if (state == nullptr) {
    state = std::make_unique<LtState>();
    state->device = device;
  }
  return *state;
}

absl::StatusOr<const Plan*> PlanFor(LtState& state, const PlanKey& key, const Tensor& x, const Tensor& w,
                                    const Tensor& out, cudaStream_t stream) {
  auto it = state.plans.find(key);
  if (it != state.plans.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  plan->choice.m = key.m, plan->choice.n = key.n, plan->choice.k = key.k;
  plan->choice.x_dtype = x.dtype(), plan->choice.w_dtype = w.dtype(), plan->choice.out_dtype = out.dtype();
  const MatmulTuning tuning = GetMatmulTuning();
  const std::string scope = ScopeOf(state.device, tuning);
  Decision decision;
  if (!TheDecisions().Find(scope, key, &decision)) {
    SEAM_RETURN_IF_ERROR(MakePlan(state, *plan, key, tuning, x, w, out, stream));
    decision = TheDecisions().Publish(scope, key, Decision{plan->kernel, plan->algo, plan->choice});
  }
  SEAM_RETURN_IF_ERROR(Adopt(state, *plan, key, decision, w.dtype(), out.dtype()));
  const Plan* raw = plan.get();
  state.plans.emplace(key, std::move(plan));
  state.order.push_back(raw);
  return raw;
}

absl::Status CreateMatmulDesc(cublasLtMatmulDesc_t* desc) {
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  SEAM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  SEAM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> HeuristicResults(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t d, const uint32_t (&aligns)[4], int count) {
  cublasLtMatmulPreference_t raw_pref = nullptr;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&raw_pref));
  // The preference lives in a unique_ptr so every early return destroys it.
  const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)> pref(
      raw_pref, cublasLtMatmulPreferenceDestroy);
  const uint64_t workspace = kMatmulWorkspaceBytes;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                   &workspace, sizeof(workspace)));
  const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    SEAM_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulPreferenceSetAttribute(raw_pref, align_attrs[i], &aligns[i], sizeof(aligns[i])));
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, raw_pref, count, results.data(),
                                                          &found);
  // NOT_SUPPORTED / INVALID_VALUE: no algorithm for this dtype pairing.
  if (h == CUBLAS_STATUS_NOT_SUPPORTED || h == CUBLAS_STATUS_INVALID_VALUE) found = 0;
  else SEAM_CUBLAS_RETURN_IF_ERROR(h);
  results.resize(static_cast<size_t>(std::max(found, 0)));
  return results;
}

}  // namespace seam::kernels::cuda

// Programmatic dependent launch (seam/kernels/programmatic_launch.h): a
// decode step's chain of kernels (embedding, fused add + RMSNorm, the q|k|v
// matmul, the fused attention input writing the paged caches, decode
// attention, the o matmul, add + RMSNorm, gate|up, SiLU-mul, down, residual
// add, RMSNorm, the lm_head in f32 and argmax) captured in a CUDA graph and
// replayed with PDL on and off. The two must agree bit for bit (tolerance
// zero): PDL only lets a kernel start while its predecessor drains; each
// enrolled kernel waits for that predecessor before touching its data, so
// every kernel computes on the same inputs in the same order either way.
// Batch 1 takes the GEMV for every matmul (a chain of enrolled kernels end to
// end), larger batches cuBLASLt between them; f32 takes the warp-parallel
// decode attention, bf16 the tensor-core one with its context splits.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "paged_attention_case.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/programmatic_launch.h"

namespace seam::kernels::cuda_test {
namespace {

constexpr int64_t kHidden = 512, kHq = 4, kHk = 2, kHeadDim = 128, kInter = 768, kVocab = 1000;
constexpr float kEps = 1e-6f;

// The step's weights, inputs and every tensor it writes, on the GPU.
struct Step {
  Tensor ids, table, norm1, norm2, norm_final, w_qkv, q_norm, k_norm, w_o, w_gate_up, w_down, w_lm;
  Tensor positions, slots, query_start, context_lens, block_tables;
  Tensor residual, k_cache, v_cache;                      // state the step updates (reset before each run)
  Tensor residual_init, k_cache_init, v_cache_init;       // their starting values (host)
  Tensor x, h, qkv, q, attn, o, h2, gate_up, act, down, hf, logits, next_ids;
  float scale = 0.0f;
};

Step MakeStep(DType dt, const std::vector<int32_t>& contexts) {
  const int64_t b = static_cast<int64_t>(contexts.size());
  const PagedCase c = MakeCase(Decode(contexts), kHq, kHk, kHeadDim, dt, 11);
  Step s;
  std::vector<int32_t> ids, positions, slots;
  const int64_t columns = c.block_tables.dim(1);
  const int32_t* tables = c.block_tables.data<int32_t>();
  for (int64_t i = 0; i < b; ++i) {
    ids.push_back(static_cast<int32_t>((i * 131 + 7) % kVocab));
    const int32_t pos = contexts[i] - 1;  // the step's token is the context's last
    positions.push_back(pos);
    slots.push_back(tables[i * columns + pos / kBlockSize] * static_cast<int32_t>(kBlockSize) +
                    pos % static_cast<int32_t>(kBlockSize));
  }
  s.ids = OnGpu(Tensor::FromInts(ids, {b}));
  s.positions = OnGpu(Tensor::FromInts(positions, {b}));
  s.slots = OnGpu(Tensor::FromInts(slots, {b}));
  s.query_start = OnGpu(c.query_start);
  s.context_lens = OnGpu(c.context_lens);
  s.block_tables = OnGpu(c.block_tables);
  s.scale = c.scale;
  const int64_t qkv_width = (kHq + 2 * kHk) * kHeadDim;
  const float w_range = 0.06f;  // keeps activations of order one through the matmuls
  s.table = OnGpu(Random({kVocab, kHidden}, dt, 21));
  s.norm1 = OnGpu(Random({kHidden}, dt, 22, 0.5f, 1.5f));
  s.norm2 = OnGpu(Random({kHidden}, dt, 23, 0.5f, 1.5f));
  s.norm_final = OnGpu(Random({kHidden}, dt, 24, 0.5f, 1.5f));
  s.w_qkv = OnGpu(Random({qkv_width, kHidden}, dt, 25, -w_range, w_range));
  s.q_norm = OnGpu(Random({kHeadDim}, dt, 26, 0.5f, 1.5f));
  s.k_norm = OnGpu(Random({kHeadDim}, dt, 27, 0.5f, 1.5f));
  s.w_o = OnGpu(Random({kHidden, kHq * kHeadDim}, dt, 28, -w_range, w_range));
  s.w_gate_up = OnGpu(Random({2 * kInter, kHidden}, dt, 29, -w_range, w_range));
  s.w_down = OnGpu(Random({kHidden, kInter}, dt, 30, -w_range, w_range));
  s.w_lm = OnGpu(Random({kVocab, kHidden}, dt, 31, -w_range, w_range));
  s.residual_init = Random({b, kHidden}, dt, 32);
  s.k_cache_init = c.k_cache;
  s.v_cache_init = c.v_cache;
  s.residual = OnGpu(s.residual_init);
  s.k_cache = OnGpu(c.k_cache);
  s.v_cache = OnGpu(c.v_cache);
  const std::vector<std::pair<Tensor*, Shape>> written = {
      {&s.x, {b, kHidden}},         {&s.h, {b, kHidden}},      {&s.qkv, {b, qkv_width}},
      {&s.q, {b, kHq, kHeadDim}},   {&s.attn, {b, kHq, kHeadDim}}, {&s.o, {b, kHidden}},
      {&s.h2, {b, kHidden}},        {&s.gate_up, {b, 2 * kInter}}, {&s.act, {b, kInter}},
      {&s.down, {b, kHidden}},      {&s.hf, {b, kHidden}}};
  for (const auto& [t, shape] : written) *t = PoisonedGpu(shape, dt);
  s.logits = PoisonedGpu({b, kVocab}, DType::kF32);
  s.next_ids = PoisonedIndexGpu({b});
  return s;
}

// The chain, on the calling thread's current stream.
absl::Status RunStep(const Step& s) {
  const int64_t b = s.ids.numel();
  SEAM_RETURN_IF_ERROR(Embedding(s.ids, s.table, 0, s.x));
  SEAM_RETURN_IF_ERROR(FusedAddRmsNorm(s.x, s.residual, s.norm1, kEps, s.h));
  SEAM_RETURN_IF_ERROR(Matmul(s.h, s.w_qkv, s.qkv));
  SEAM_RETURN_IF_ERROR(QkvNormRopeCache(s.qkv, s.q_norm, s.k_norm, kEps, s.positions, 1e6f, s.slots, s.k_cache,
                                        s.v_cache, s.q));
  const AttentionBatch batch{s.query_start, s.context_lens, s.block_tables};
  SEAM_RETURN_IF_ERROR(PagedAttention(s.q, s.k_cache, s.v_cache, batch, s.scale, s.attn));
  SEAM_ASSIGN_OR_RETURN(const Tensor attn_rows, s.attn.Reshape({b, kHq * kHeadDim}));
  SEAM_RETURN_IF_ERROR(Matmul(attn_rows, s.w_o, s.o));
  SEAM_RETURN_IF_ERROR(FusedAddRmsNorm(s.o, s.residual, s.norm2, kEps, s.h2));
  SEAM_RETURN_IF_ERROR(Matmul(s.h2, s.w_gate_up, s.gate_up));
  SEAM_RETURN_IF_ERROR(SiluAndMul(s.gate_up, s.act));
  SEAM_RETURN_IF_ERROR(Matmul(s.act, s.w_down, s.down));
  SEAM_RETURN_IF_ERROR(AddInPlace(s.residual, s.down));
  SEAM_RETURN_IF_ERROR(RmsNorm(s.residual, s.norm_final, kEps, s.hf));
  SEAM_RETURN_IF_ERROR(Matmul(s.hf, s.w_lm, s.logits));
  return Argmax(s.logits, s.next_ids);
}

// Edges of `graph` of the programmatic type (a kernel that may start while
// the one before drains); -1 where this CUDA runtime cannot tell.
int64_t ProgrammaticEdges(cudaGraph_t graph) {
#if CUDART_VERSION >= 12030
  size_t n = 0;
#if CUDART_VERSION >= 13000
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n) != cudaSuccess) return -1;
#else
  if (cudaGraphGetEdges_v2(graph, nullptr, nullptr, nullptr, &n) != cudaSuccess) return -1;
#endif
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
#if CUDART_VERSION >= 13000
  if (cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n) != cudaSuccess) return -1;
#else
  if (cudaGraphGetEdges_v2(graph, from.data(), to.data(), data.data(), &n) != cudaSuccess) return -1;
#endif
  int64_t programmatic = 0;
  for (size_t i = 0; i < n; ++i) programmatic += data[i].type == cudaGraphDependencyTypeProgrammatic;
  return programmatic;
#else
  return -1;
#endif
}

struct Replayed {
  std::vector<std::vector<char>> bytes;  // every tensor the step writes, in Outputs' order
  int64_t programmatic_edges = -1;
};

std::vector<const Tensor*> Outputs(const Step& s) {
  return {&s.residual, &s.k_cache, &s.v_cache, &s.x,  &s.h,    &s.qkv,  &s.q,      &s.attn,
          &s.o,        &s.h2,      &s.gate_up, &s.act, &s.down, &s.hf,   &s.logits, &s.next_ids};
}

// Waits for the work issued on `stream` for at most a minute: a step that
// hangs (a kernel that never completes) ends the test binary with what it
// was waiting for, since a context with a running kernel cannot be recovered.
void AwaitOrAbort(const CudaStream& stream, const std::string& what) {
  absl::StatusOr<CudaEvent> done = CudaEvent::Create(stream.device());
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->Record(stream).ok()) << what;
  const absl::Status waited = done->Wait(absl::Now() + absl::Seconds(60));
  if (absl::IsDeadlineExceeded(waited)) {
    std::cerr << "the step did not finish within 60 s (" << what << ")" << std::endl;
    std::abort();
  }
  EXPECT_TRUE(waited.ok()) << what << ": " << waited;
}

// The step captured with PDL `on` and replayed `replays` times (the state
// reset before each): what it wrote, and its graph's programmatic edges.
Replayed Replay(Step& s, bool on, int replays) {
  Replayed result;
  int device = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  absl::StatusOr<CudaStream> made = CudaStream::Create(Device::CUDA(device));
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return result;
  const CudaStream& owned = *made;
  cudaStream_t stream = static_cast<cudaStream_t>(owned.handle());
  const bool before = ProgrammaticLaunch();
  SetProgrammaticLaunch(on);
  {
    ScopedStream scoped(stream);
    auto reset = [&] {
      EXPECT_TRUE(CopyInto(s.residual_init, s.residual).ok());
      EXPECT_TRUE(CopyInto(s.k_cache_init, s.k_cache).ok());
      EXPECT_TRUE(CopyInto(s.v_cache_init, s.v_cache).ok());
    };
    reset();
    // Warm-up outside the capture: the matmuls' plans and workspaces, the split workspace.
    absl::Status status = RunStep(s);
    EXPECT_TRUE(status.ok()) << status;
    const std::string mode = on ? "PDL on" : "PDL off";
    AwaitOrAbort(owned, mode + ", the eager warm-up");
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    status = RunStep(s);
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    EXPECT_TRUE(status.ok()) << status;
    result.programmatic_edges = ProgrammaticEdges(graph);
    cudaGraphExec_t exec = nullptr;
    EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int r = 0; r < replays; ++r) {
      AwaitOrAbort(owned, mode + ", before replay " + std::to_string(r));
      reset();
      EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    }
    AwaitOrAbort(owned, mode + ", the last replay");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    for (const Tensor* t : Outputs(s)) {
      absl::StatusOr<Tensor> host = t->To(Device::CPU());
      EXPECT_TRUE(host.ok()) << host.status();
      if (!host.ok()) break;
      const char* p = static_cast<const char*>(host->raw_data());
      result.bytes.emplace_back(p, p + host->nbytes());
    }
  }
  SetProgrammaticLaunch(before);
  return result;
}

// (dtype, contexts of the batch)
class ProgrammaticLaunchTest
    : public CudaKernelsTest,
      public ::testing::WithParamInterface<std::tuple<DType, std::vector<int32_t>>> {
 protected:
  void SetUp() override {
    CudaKernelsTest::SetUp();
    if (IsSkipped()) return;
    int device = 0, major = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
    if (major < 9) GTEST_SKIP() << "compute capability " << major << ".x: no programmatic dependent launch";
  }
};

TEST_P(ProgrammaticLaunchTest, GraphReplaysOfADecodeStepAreBitIdenticalWithAndWithout) {
  const auto& [dt, contexts] = GetParam();
  Step s = MakeStep(dt, contexts);
  const Replayed off = Replay(s, false, 3);
  const Replayed on = Replay(s, true, 3);
  ASSERT_EQ(off.bytes.size(), Outputs(s).size());
  ASSERT_EQ(on.bytes.size(), off.bytes.size());
  // The switch is what changes the graph: more programmatic edges with it;
  // none without it where every matmul is the GEMV (batch 1: no cuBLASLt
  // kernel, whose own launches this switch does not govern).
  std::cout << "programmatic edges of the step's graph: PDL off " << off.programmatic_edges << ", on "
            << on.programmatic_edges << "\n";
  if (on.programmatic_edges >= 0) {
    EXPECT_GT(on.programmatic_edges, off.programmatic_edges);
    if (contexts.size() == 1) {
      EXPECT_EQ(off.programmatic_edges, 0);
    }
  }
  const char* names[] = {"residual", "k_cache", "v_cache", "x",    "h",    "qkv",  "q",      "attn",
                         "o",        "h2",      "gate_up", "act",  "down", "hf",   "logits", "next_ids"};
  for (size_t i = 0; i < off.bytes.size(); ++i) {
    ASSERT_EQ(on.bytes[i].size(), off.bytes[i].size()) << names[i];
    EXPECT_EQ(std::memcmp(on.bytes[i].data(), off.bytes[i].data(), on.bytes[i].size()), 0)
        << names[i] << " differs with PDL on";
  }
  // Not all poison: the step wrote its outputs (a NaN-free argmax row is never -1).
  std::vector<int32_t> ids(off.bytes.back().size() / sizeof(int32_t));
  std::memcpy(ids.data(), off.bytes.back().data(), off.bytes.back().size());
  for (int32_t id : ids) EXPECT_GE(id, 0);
}

std::vector<int32_t> Contexts(int64_t b) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < b; ++i) out.push_back(static_cast<int32_t>(1 + (i * 397 + 250) % 1200));
  return out;
}

INSTANTIATE_TEST_SUITE_P(Steps, ProgrammaticLaunchTest,
                         ::testing::Values(std::make_tuple(DType::kBF16, std::vector<int32_t>{1000}),
                                           std::make_tuple(DType::kBF16, Contexts(8)),
                                           std::make_tuple(DType::kF32, std::vector<int32_t>{5}),
                                           std::make_tuple(DType::kF32, Contexts(8))));
// Batch 64: cuBLASLt matmuls between the enrolled kernels.
INSTANTIATE_TEST_SUITE_P(Batch64, ProgrammaticLaunchTest,
                         ::testing::Values(std::make_tuple(DType::kBF16, Contexts(64))));

}  // namespace
}  // namespace seam::kernels::cuda_test

// CUDA-graph decode in the served path: a CUDA StageGroup whose decode steps
// replay per-bucket graphs gives the eager group's logits bit for bit (same
// kernels in the same order; padding rows write no KV slot and their outputs
// are dropped), for the whole model at TP 1 and TP 2 and for a two-piece
// pipeline, dense or MoE (whose experts run grouped on the device), and
// LongCat-Flash (latent cache, MoE with zero experts) within a stated
// tolerance. GraphStats says which bucket each step replayed. Prefill, and
// MoE pieces running their experts one by one, stay eager. GPU tests skip without a GPU (TP 2: without
// two GPUs, since NCCL refuses two ranks of one communicator on one GPU).
//
// Bit equality against an unpadded eager step needs the kernels' shape
// choices to agree: the tests keep every context inside two 16-token blocks,
// the width of the graphs' tables (graph_max_context 32), so the eager step's
// widest table is the graph's, and batches of at most 8 rows (the GEMV
// matmul, row by row).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "seam/core/device_memory.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"
#include "stage_pieces.h"

namespace seam::runtime {
namespace {

using testing::FourLayerCheckpointDir;
using testing::PromptTokens;
using testing::TinyCheckpointDir;
using testing::TinyLongcatFlashCheckpointDir;

constexpr int kSequences = 8;

bool BitEqual(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<float> x = a.ToFloats(), y = b.ToFloats();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

struct GraphSetup {
  bool graphs = false;
  int tp = 1;
  DType dtype = DType::kF32;
  boundary::AllReduceFusionMode fusion = boundary::AllReduceFusionMode::kOff;
  models::MoeExperts moe_experts = models::MoeExperts::kAuto;
};

StageGroupOptions Options(const GraphSetup& s, int first_layer, int end_layer) {
  StageGroupOptions o;
  o.device = Device::Kind::kCUDA;
  o.model.dtype = s.dtype;
  o.cache.dtype = s.dtype;
  o.kv.cache_bytes = int64_t{64} << 20;
  o.model.first_layer = first_layer;
  o.model.end_layer = end_layer;
  o.allreduce_fusion.mode = s.fusion;
  o.model.moe_experts = s.moe_experts;
  if (s.graphs) {
    o.graph_buckets = {1, 2, 4, 8};
    o.graph_max_context = 32;
  }
  return o;
}

// Stage groups for layers [cuts[i], cuts[i+1]) with the setup's options.
struct Pieces {
  static std::unique_ptr<model_testing::StagePieces> Make(const std::string& dir, const GraphSetup& s,
                                                          const std::vector<int>& cuts) {
    return model_testing::StagePieces::Make(dir, s.tp, cuts,
                                            [&s](int first, int end) { return Options(s, first, end); });
  }
};

// Prefill of kSequences prompts of 17..24 tokens (two blocks each), then two
// decode steps at each batch size (1, 3 padded to 4, 8): the logits of every
// step, per sequence.
std::vector<std::vector<Tensor>> RunSteps(model_testing::StagePieces& p) {
  std::vector<std::vector<Tensor>> logits;
  std::vector<int64_t> next(kSequences);
  std::vector<models::SequenceStep> prefill;
  for (int i = 0; i < kSequences; ++i) {
    next[i] = 17 + i;
    prefill.push_back(models::SequenceStep{uint64_t(i), PromptTokens(90 + i, 17 + i, 128), 0});
  }
  auto out = p.Step(prefill);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return logits;
  logits.push_back(std::move(*out));
  int step = 0;
  for (int batch : {1, 3, 8}) {
    for (int repeat = 0; repeat < 2; ++repeat, ++step) {
      std::vector<models::SequenceStep> decode;
      for (int i = 0; i < batch; ++i) {
        const int seq = (i * 3 + step) % kSequences;  // a different subset each step
        bool taken = false;
        for (const auto& s : decode) taken |= s.sequence == uint64_t(seq);
        if (taken) continue;
        decode.push_back(models::SequenceStep{uint64_t(seq), {int32_t(1 + (5 * step + seq) % 127)}, next[seq]++});
      }
      out = p.Step(decode);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return logits;
      logits.push_back(std::move(*out));
    }
  }
  return logits;
}

// Bit for bit at `rel` 0; else each logit within `rel` of its step's
// largest |logit| for the sequence.
void ExpectMatch(const std::vector<std::vector<Tensor>>& got, const std::vector<std::vector<Tensor>>& want,
                 double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t step = 0; step < want.size(); ++step) {
    ASSERT_EQ(got[step].size(), want[step].size()) << "step " << step;
    for (size_t i = 0; i < want[step].size(); ++i) {
      if (rel == 0) {
        EXPECT_TRUE(BitEqual(got[step][i], want[step][i])) << "step " << step << ", sequence " << i;
        continue;
      }
      ASSERT_EQ(got[step][i].shape(), want[step][i].shape()) << "step " << step << ", sequence " << i;
      const std::vector<float> a = got[step][i].ToFloats(), b = want[step][i].ToFloats();
      double most = 0, diff = 0;
      for (size_t j = 0; j < b.size(); ++j) {
        most = std::max(most, std::fabs(double(b[j])));
        diff = std::max(diff, std::fabs(double(a[j]) - double(b[j])));
      }
      EXPECT_LE(diff, rel * most) << "step " << step << ", sequence " << i;
    }
  }
}

class GraphDecode : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible; graph decode tests skipped";
  }
  // The eager and the graphed run of the same pieces; checks the logits
  // (bit for bit, or within f32_rel / bf16_rel: ExpectMatch) and counters.
  void Compare(const std::string& dir, GraphSetup s, const std::vector<int>& cuts, double f32_rel = 0,
               double bf16_rel = 0) {
    s.dtype = GetParam();
    auto eager = Pieces::Make(dir, s, cuts);
    s.graphs = true;
    auto graphed = Pieces::Make(dir, s, cuts);
    ASSERT_TRUE(eager != nullptr && graphed != nullptr);
    const std::vector<std::vector<Tensor>> want = RunSteps(*eager);
    const std::vector<std::vector<Tensor>> got = RunSteps(*graphed);
    ExpectMatch(got, want, s.dtype == DType::kF32 ? f32_rel : bf16_rel);
    for (const auto& piece : graphed->pieces) {
      const GraphDecodeStats stats = piece->GraphStats();
      EXPECT_EQ(stats.off_reason, "");
      EXPECT_EQ(stats.captured, (std::vector<int64_t>{1, 2, 4, 8})) << stats.ToString();
      EXPECT_EQ(stats.replays, (std::map<int64_t, int64_t>{{1, 2}, {4, 2}, {8, 2}})) << stats.ToString();
      EXPECT_EQ(stats.eager_steps, 1) << "the prefill";
    }
    for (const auto& piece : eager->pieces) EXPECT_EQ(piece->GraphStats().eager_steps, 7);
  }
};

TEST_P(GraphDecode, WholeModelAtTp1ReplaysTheEagerStep) { Compare(TinyCheckpointDir(false), GraphSetup{}, {0, 2}); }

TEST_P(GraphDecode, WholeModelAtTp2ReplaysTheEagerStep) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP 2 needs two GPUs (one NCCL rank per GPU)";
  GraphSetup s;
  s.tp = 2;
  Compare(TinyCheckpointDir(false), s, {0, 2});
}

TEST_P(GraphDecode, Tp2WithTheIpcFusionInsideTheGraph) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP 2 needs two GPUs (one NCCL rank per GPU)";
  if (GetParam() != DType::kBF16) GTEST_SKIP() << "the IPC all-reduce fusion serves bf16 groups only";
  GraphSetup s;
  s.tp = 2;
  s.fusion = boundary::AllReduceFusionMode::kAlways;
  Compare(TinyCheckpointDir(false), s, {0, 2});
}

TEST_P(GraphDecode, TwoPiecePipelineHandsOffThroughFixedBuffers) {
  Compare(FourLayerCheckpointDir(false), GraphSetup{}, {0, 2, 4});
}

// Every piece, the non-first one too (its handoff form comes from its
// producer's declaration), holds every bucket before its first step.
TEST_P(GraphDecode, EveryPieceCapturesEveryBucketAtStart) {
  GraphSetup s;
  s.dtype = GetParam();
  s.graphs = true;
  auto p = Pieces::Make(FourLayerCheckpointDir(false), s, {0, 2, 4});
  ASSERT_TRUE(p != nullptr);
  for (const auto& piece : p->pieces) {
    EXPECT_EQ(piece->GraphStats().captured, (std::vector<int64_t>{1, 2, 4, 8})) << piece->GraphStats().ToString();
  }
  RunSteps(*p);
  for (const auto& piece : p->pieces) {
    const GraphDecodeStats stats = piece->GraphStats();
    EXPECT_EQ(stats.captured, (std::vector<int64_t>{1, 2, 4, 8})) << stats.ToString();
    EXPECT_EQ(stats.replays, (std::map<int64_t, int64_t>{{1, 2}, {4, 2}, {8, 2}})) << stats.ToString();
  }
}

// Grouped experts: each (row, expert) pair's matmul and each row's finalize
// depend on that row alone, so the padding rows a graph adds (routed like
// any row) change no bit of the real rows.
TEST_P(GraphDecode, MoeModelReplaysTheEagerStep) { Compare(TinyCheckpointDir(true), GraphSetup{}, {0, 2}); }

TEST_P(GraphDecode, MoePipelineReplaysTheEagerStep) { Compare(FourLayerCheckpointDir(true), GraphSetup{}, {0, 2, 4}); }

TEST_P(GraphDecode, MoeAtTp2ReplaysTheEagerStep) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP 2 needs two GPUs (one NCCL rank per GPU)";
  GraphSetup s;
  s.tp = 2;
  Compare(TinyCheckpointDir(true), s, {0, 2});
}

// LongCat-Flash: its router and experts run on the device (zero experts'
// slots filled there too), MLA attends its latent cache, and the branch
// stages sit inside the graph. The padding rows a graph adds change no real
// row's routes or expert sums, but MLA's batched head matmuls (cuBLASLt,
// strided-batched) may take another algorithm for the padded row count (4
// for 3) and sum in another order. So f32 within 1e-4 of the step's largest
// logit (a few fp32 ulps grown through 2 layers of 4 attentions, as the
// golden test's bound); bf16 within 5e-2 (one intermediate element rounded
// the other way at a bf16 ulp, 2^-8 relative, moves the outputs by about
// that much, several times over). Pure f32 agreement is usually bitwise.
TEST_P(GraphDecode, LongcatFlashReplaysTheEagerStep) {
  Compare(TinyLongcatFlashCheckpointDir(), GraphSetup{}, {0, 2}, 1e-4, 5e-2);
}

TEST_P(GraphDecode, LongcatFlashPipelineReplaysTheEagerStep) {
  Compare(TinyLongcatFlashCheckpointDir(), GraphSetup{}, {0, 1, 2}, 1e-4, 5e-2);
}

// At TP 2 the zero experts' slots hold the input on rank 0 of the MoE's sum
// and zeros on rank 1, inside the graph as in the eager step.
TEST_P(GraphDecode, LongcatFlashAtTp2ReplaysTheEagerStep) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP 2 needs two GPUs (one NCCL rank per GPU)";
  GraphSetup s;
  s.tp = 2;
  Compare(TinyLongcatFlashCheckpointDir(), s, {0, 2}, 1e-4, 5e-2);
}

TEST_P(GraphDecode, MoePiecesRunningExpertsOneByOneStayEager) {
  GraphSetup s;
  s.dtype = GetParam();
  s.graphs = true;
  s.moe_experts = models::MoeExperts::kPerExpert;
  auto p = Pieces::Make(TinyCheckpointDir(true), s, {0, 2});
  ASSERT_TRUE(p != nullptr);
  const GraphDecodeStats before = p->pieces[0]->GraphStats();
  EXPECT_NE(before.off_reason.find("MoE layers run their experts one by one"), std::string::npos)
      << before.off_reason;
  EXPECT_TRUE(before.captured.empty());
  auto out = p->Step({models::SequenceStep{1, {5, 6, 7}, 0}});
  ASSERT_TRUE(out.ok()) << out.status();
  out = p->Step({models::SequenceStep{1, {8}, 3}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(p->pieces[0]->GraphStats().eager_steps, 2);
  EXPECT_TRUE(p->pieces[0]->GraphStats().replays.empty());
}

TEST_P(GraphDecode, StepsPastTheLargestBucketOrTheContextLimitRunEagerly) {
  GraphSetup s;
  s.dtype = GetParam();
  s.graphs = true;
  auto p = Pieces::Make(TinyCheckpointDir(false), s, {0, 2});
  ASSERT_TRUE(p != nullptr);
  std::vector<models::SequenceStep> prefill, decode;
  for (int i = 0; i < 9; ++i) {
    prefill.push_back(models::SequenceStep{uint64_t(i), PromptTokens(i, 3, 128), 0});
    decode.push_back(models::SequenceStep{uint64_t(i), {4}, 3});
  }
  ASSERT_TRUE(p->Step(prefill).ok());
  ASSERT_TRUE(p->Step(decode).ok());  // 9 sequences: past bucket 8
  ASSERT_TRUE(p->Step({models::SequenceStep{100, PromptTokens(7, 32, 128), 0}}).ok());
  ASSERT_TRUE(p->Step({models::SequenceStep{100, {9}, 32}}).ok());  // position 32: past graph_max_context
  const GraphDecodeStats stats = p->pieces[0]->GraphStats();
  EXPECT_EQ(stats.eager_steps, 4) << stats.ToString();
  EXPECT_TRUE(stats.replays.empty()) << stats.ToString();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GraphDecode, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return info.param == DType::kF32 ? "F32" : "Bf16"; });

// On the host nothing changes: graph buckets are ignored and every step is eager.
TEST(GraphDecodeOnHost, CpuGroupsIgnoreGraphBuckets) {
  StageGroupOptions o;
  o.graph_buckets = {1, 2, 4};
  o.kv.cache_bytes = int64_t{16} << 20;
  auto group = StageGroup::Create(TinyCheckpointDir(false), 1, 1, boundary::ReductionPolicy::kAuto, o);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE((*group)->Step({models::SequenceStep{1, {3, 4}, 0}}, false).ok());
  ASSERT_TRUE((*group)->Step({models::SequenceStep{1, {5}, 2}}, false).ok());
  const GraphDecodeStats stats = (*group)->GraphStats();
  EXPECT_EQ(stats.off_reason, "the group computes on the host");
  EXPECT_EQ(stats.eager_steps, 2);
  EXPECT_TRUE(stats.captured.empty());
  EXPECT_EQ(stats.ToString(), "CUDA graph decode off: the group computes on the host");
}

}  // namespace
}  // namespace seam::runtime

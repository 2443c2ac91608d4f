// Mixed graphs in the served path: a CUDA StageGroup whose steps holding
// prefill chunks (alone or beside decode rows) replay per-rows graphs gives
// the eager group's logits, for the whole model and a two-piece pipeline
// (whose handoffs pass through the graphs' fixed buffers), dense or MoE.
// GraphStats says which graph each step replayed. GPU tests skip without a
// GPU.
//
// Tolerance: a graph runs its matmuls over the padded rows (16, 32 or 64),
// the eager step over the real ones, and the matmul may tile or split a
// different M differently, which reorders the fp32 sums: the logits agree
// within 1e-4 of their largest magnitude in f32 (a few ulps through four
// layers of K = 64..128 sums) and within 3e-2 in bf16 (where a reordered sum
// can move a rounding of the bf16 activations by one ulp, 2^-8, through
// the layers). The attention, norms and embedding compute each row alike.
#include <algorithm>
#include <cmath>
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

StageGroupOptions Options(DType dtype, bool graphs, int first_layer, int end_layer) {
  StageGroupOptions o;
  o.device = Device::Kind::kCUDA;
  o.model.dtype = dtype;
  o.cache.dtype = dtype;
  o.kv.cache_bytes = int64_t{64} << 20;
  o.model.first_layer = first_layer;
  o.model.end_layer = end_layer;
  if (graphs) {
    o.graph_buckets = {1, 2, 4, 8};
    o.mixed_graph_rows = {16, 32, 64};
    o.graph_max_context = 64;
  }
  return o;
}

std::unique_ptr<model_testing::StagePieces> MakePieces(const std::string& dir, DType dtype, bool graphs,
                                                      const std::vector<int>& cuts) {
  return model_testing::StagePieces::Make(dir, 1, cuts,
                                          [&](int first, int end) { return Options(dtype, graphs, first, end); });
}

models::SequenceStep Chunk(uint64_t sequence, int64_t start, int64_t tokens) {
  return models::SequenceStep{sequence, PromptTokens(static_cast<int>(7 * sequence + 3), static_cast<int>(tokens), 128),
                              start};
}

// Prompts in chunks beside decode rows: 17 rows (graph of 32), 39 (64), 7 of
// 5 sequences (16), then a decode step (decode graph 4) and a prompt of 50
// in one step beside 4 decode rows (64).
std::vector<std::vector<Tensor>> RunSteps(model_testing::StagePieces& p) {
  const std::vector<std::vector<models::SequenceStep>> steps = {
      {Chunk(0, 0, 12), Chunk(1, 0, 5)},
      {Chunk(0, 12, 8), Chunk(1, 5, 1), Chunk(2, 0, 30)},
      {Chunk(0, 20, 1), Chunk(1, 6, 1), Chunk(2, 30, 1), Chunk(3, 0, 3), Chunk(4, 0, 1)},
      {Chunk(0, 21, 1), Chunk(1, 7, 1), Chunk(2, 31, 1), Chunk(3, 3, 1)},
      {Chunk(0, 22, 1), Chunk(1, 8, 1), Chunk(5, 0, 50), Chunk(2, 32, 1), Chunk(3, 4, 1)},
  };
  std::vector<std::vector<Tensor>> logits;
  for (const auto& step : steps) {
    auto out = p.Step(step);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return logits;
    logits.push_back(std::move(*out));
  }
  return logits;
}

class MixedGraph : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible; mixed graph tests skipped";
  }
  void Compare(const std::string& dir, const std::vector<int>& cuts) {
    auto eager = MakePieces(dir, GetParam(), false, cuts);
    auto graphed = MakePieces(dir, GetParam(), true, cuts);
    ASSERT_TRUE(eager != nullptr && graphed != nullptr);
    const auto want = RunSteps(*eager);
    const auto got = RunSteps(*graphed);
    ASSERT_EQ(got.size(), want.size());
    const double tolerance = GetParam() == DType::kF32 ? 1e-4 : 3e-2;
    for (size_t step = 0; step < want.size(); ++step) {
      ASSERT_EQ(got[step].size(), want[step].size()) << "step " << step;
      for (size_t i = 0; i < want[step].size(); ++i) {
        const std::vector<float> x = got[step][i].ToFloats(), y = want[step][i].ToFloats();
        ASSERT_EQ(x.size(), y.size());
        double largest = 0, diff = 0;
        for (size_t k = 0; k < x.size(); ++k) {
          largest = std::max(largest, std::fabs(double(y[k])));
          diff = std::max(diff, std::fabs(double(x[k]) - double(y[k])));
        }
        EXPECT_LE(diff, tolerance * largest) << "step " << step << ", sequence " << i;
      }
    }
    for (const auto& piece : graphed->pieces) {
      const GraphDecodeStats stats = piece->GraphStats();
      EXPECT_EQ(stats.mixed_off_reason, "") << stats.ToString();
      EXPECT_EQ(stats.mixed_captured, (std::vector<int64_t>{16, 32, 64})) << stats.ToString();
      EXPECT_EQ(stats.mixed_replays, (std::map<int64_t, int64_t>{{16, 1}, {32, 1}, {64, 2}})) << stats.ToString();
      EXPECT_EQ(stats.replays, (std::map<int64_t, int64_t>{{4, 1}})) << stats.ToString();
      EXPECT_EQ(stats.eager_steps, 0) << stats.ToString();
    }
  }
};

TEST_P(MixedGraph, WholeModelReplaysTheEagerSteps) { Compare(TinyCheckpointDir(false), {0, 2}); }

TEST_P(MixedGraph, TwoPiecePipelineHandsOffThroughFixedBuffers) { Compare(FourLayerCheckpointDir(false), {0, 2, 4}); }

TEST_P(MixedGraph, MoeModelReplaysTheEagerSteps) { Compare(TinyCheckpointDir(true), {0, 2}); }

// A prompt's every-token logits, and a step past the largest graph, run eagerly.
TEST_P(MixedGraph, AllLogitsAndStepsPastTheLargestGraphRunEagerly) {
  auto p = MakePieces(TinyCheckpointDir(false), GetParam(), true, {0, 2});
  ASSERT_TRUE(p != nullptr);
  auto all = p->pieces[0]->StepPiece({Chunk(0, 0, 5)}, /*all_logits=*/true, {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->logits[0].dim(0), 5);
  auto past = p->Step({Chunk(1, 0, 60), Chunk(2, 0, 10)});
  ASSERT_TRUE(past.ok()) << past.status();
  const GraphDecodeStats stats = p->pieces[0]->GraphStats();
  EXPECT_EQ(stats.eager_steps, 2) << stats.ToString();
  EXPECT_TRUE(stats.mixed_replays.empty()) << stats.ToString();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MixedGraph, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return info.param == DType::kF32 ? "f32" : "bf16"; });

}  // namespace
}  // namespace seam::runtime

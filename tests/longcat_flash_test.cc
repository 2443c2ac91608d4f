// LongCat-Flash on the CPU over Gloo: a random checkpoint written by
// WriteRandomCheckpoint (as `seam model init --arch longcat_flash` writes
// it) loads back, the same experts stacked as transformers 5 may save them
// compute the same logits, and every split seam serves (TP 1, 2, 4 × attention DP
// 1, 2 × PP 1, 2, each reduction policy's default) prefills and decodes the
// greedy tokens of one rank, with logits within 1e-5 relative of one rank's:
// TP and DP change only the order of fp32 sums (partial sums over heads and
// intermediate slices), PP changes nothing (a pure pipeline split is bit for
// bit the single rank, checked exactly). The experts grouped as on CUDA (the
// fused and grouped kernels' CPU references) give the one-by-one logits.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "seam/core/status.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/safetensors.h"
#include "piece_pipeline.h"

namespace seam {
namespace {

int32_t LastArgmax(const Tensor& logits) {
  const std::vector<float> v = logits.ToFloats();
  const int64_t vocab = logits.dim(-1), row = logits.rows() - 1;
  return static_cast<int32_t>(std::max_element(v.begin() + row * vocab, v.end()) - (v.begin() + row * vocab));
}

// Prefill of three prompts of different lengths, then three greedy decode steps.
struct Generated {
  std::vector<std::vector<int32_t>> tokens;  // per sequence
  std::vector<Tensor> logits;                // prefill's (every position), then each decode step's, in order
};

absl::StatusOr<Generated> Generate(testing::PiecePipeline& pipeline) {
  std::vector<models::SequenceStep> batch;
  const std::vector<int> lengths = {5, 9, 3};
  for (size_t i = 0; i < lengths.size(); ++i) {
    batch.push_back({i + 1, testing::PromptTokens(static_cast<int>(i) + 7, lengths[i], 128), 0});
  }
  Generated run;
  run.tokens.resize(batch.size());
  SEAM_ASSIGN_OR_RETURN(std::vector<Tensor> logits, pipeline.Step(batch, true));
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < batch.size(); ++i) {
      run.logits.push_back(logits[i]);
      const int32_t next = LastArgmax(logits[i]);
      run.tokens[i].push_back(next);
      batch[i].start += static_cast<int64_t>(batch[i].tokens.size());
      batch[i].tokens = {next};
    }
    if (step == 3) break;
    SEAM_ASSIGN_OR_RETURN(logits, pipeline.Step(batch, false));
  }
  return run;
}

const Generated& SingleRank() {
  static const Generated run = [] {
    testing::PiecePipeline p;
    SEAM_CHECK_OK(p.Open(testing::TinyLongcatFlashCheckpointDir(), 1, 1, {0, 2}));
    auto r = Generate(p);
    SEAM_CHECK_OK(r.status());
    return *r;
  }();
  return run;
}

TEST(LongcatFlash, ARandomCheckpointLoadsBackWithItsConfig) {
  const std::string& dir = testing::TinyLongcatFlashCheckpointDir();
  auto checkpoint = weights::Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const weights::ModelConfig want = testing::TinyLongcatFlashConfig(), &got = (*checkpoint)->config();
  EXPECT_EQ(got.architecture, "longcat_flash");
  EXPECT_EQ(got.num_hidden_layers, want.num_hidden_layers);  // logical layers (config.json: twice that)
  EXPECT_EQ(got.q_lora_rank, want.q_lora_rank);
  EXPECT_EQ(got.kv_lora_rank, want.kv_lora_rank);
  EXPECT_EQ(got.qk_nope_head_dim, want.qk_nope_head_dim);
  EXPECT_EQ(got.qk_rope_head_dim, want.qk_rope_head_dim);
  EXPECT_EQ(got.v_head_dim, want.v_head_dim);
  EXPECT_EQ(got.num_experts, want.num_experts);
  EXPECT_EQ(got.zero_expert_num, want.zero_expert_num);
  EXPECT_EQ(got.num_experts_per_tok, want.num_experts_per_tok);
  EXPECT_EQ(got.moe_intermediate_size, want.moe_intermediate_size);
  EXPECT_EQ(got.intermediate_size, want.intermediate_size);
  EXPECT_EQ(got.routed_scaling_factor, want.routed_scaling_factor);
  EXPECT_TRUE((*checkpoint)->Has("model.layers.1.mlp.router.e_score_correction_bias"));
  EXPECT_TRUE((*checkpoint)->Has("model.layers.0.self_attn.1.kv_b_proj.weight"));
  const Generated& run = SingleRank();
  for (const auto& tokens : run.tokens) EXPECT_EQ(tokens.size(), 4u);
}

TEST(LongcatFlash, AGroupNeverScattersTheInputOfItsBranches) {
  runtime::StageGroupOptions options;
  options.variants = *boundary::ParseVariantChoice("sequence-parallel");
  auto refused = runtime::StageGroup::Create(testing::TinyLongcatFlashCheckpointDir(), 2, 1,
                                             boundary::ReductionPolicy::kAuto, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("serve ordinary token rows only"), std::string::npos)
      << refused.status();
  // Under auto, a batch past scatter_input_rows still runs as ordinary token rows.
  options.variants = boundary::VariantChoiceOptions{};
  options.variants.scatter_input_rows = 4;
  auto group = runtime::StageGroup::Create(testing::TinyLongcatFlashCheckpointDir(), 2, 1,
                                           boundary::ReductionPolicy::kAuto, options);
  ASSERT_TRUE(group.ok()) << group.status();
  auto logits = (*group)->Step({models::SequenceStep{1, testing::PromptTokens(3, 16, 128), 0}}, false);
  ASSERT_TRUE(logits.ok()) << logits.status();
}

// The random checkpoint rewritten with each layer's routed experts stacked
// as transformers 5 may hold them: gate_up_proj [E + Z, 2I, H] (the zero
// experts' slots filled with values no expert may read) and down_proj [E, H, I].
void WriteStackedExperts(const std::string& from, const std::string& to) {
  auto file = weights::SafetensorsFile::Open(from + "/model.safetensors");
  SEAM_CHECK_OK(file.status());
  const weights::ModelConfig c = testing::TinyLongcatFlashConfig();
  const int64_t e = c.num_experts, all = e + c.zero_expert_num, inter = c.moe_intermediate_size, h = c.hidden_size;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const weights::TensorInfo& info : (*file)->tensors()) {
    if (info.name.find(".mlp.experts.") == std::string::npos) out.emplace_back(info.name, *(*file)->View(info.name));
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    std::vector<float> gate_up(all * 2 * inter * h, 1e30f), down;
    for (int64_t x = 0; x < e; ++x) {
      const std::string q = p + std::to_string(x) + ".";
      const std::vector<float> g = (*file)->View(q + "gate_proj.weight")->ToFloats();
      const std::vector<float> u = (*file)->View(q + "up_proj.weight")->ToFloats();
      const std::vector<float> d = (*file)->View(q + "down_proj.weight")->ToFloats();
      std::copy(g.begin(), g.end(), gate_up.begin() + x * 2 * inter * h);
      std::copy(u.begin(), u.end(), gate_up.begin() + (x * 2 + 1) * inter * h);
      down.insert(down.end(), d.begin(), d.end());
    }
    out.emplace_back(p + "gate_up_proj", Tensor::FromFloats(gate_up, {all, 2 * inter, h}));
    out.emplace_back(p + "down_proj", Tensor::FromFloats(down, {e, h, inter}));
  }
  SEAM_CHECK_OK(weights::WriteSafetensors(to + "/model.safetensors", out));
  std::filesystem::copy_file(from + "/config.json", to + "/config.json");
}

TEST(LongcatFlash, StackedExpertsLoadAsTheirModules) {
  testing::TempDir stacked("seam_longcat_stacked");
  WriteStackedExperts(testing::TinyLongcatFlashCheckpointDir(), stacked.path());
  for (int tp : {1, 2}) {
    testing::PiecePipeline p;
    ASSERT_TRUE(p.Open(stacked.path(), tp, 1, {0, 2}).ok());
    auto run = Generate(p);
    ASSERT_TRUE(run.ok()) << run.status();
    const Generated& one = SingleRank();
    EXPECT_EQ(run->tokens, one.tokens);
    for (size_t i = 0; i < one.logits.size(); ++i) {
      EXPECT_LE(testing::MaxRelativeError(run->logits[i], one.logits[i]), tp == 1 ? 0.0 : 1e-5) << i;
    }
  }
}

// The experts grouped as CUDA runs them, here through the CPU references of
// the fused pair and of ExpertMatmul (the zero experts' slots filled by
// IdentityExpertPairs on rank 0 of the sum), against one by one (the host's
// default, OpenBLAS matmuls): the same greedy tokens, logits within 1e-5
// relative (the references sum K in index order, OpenBLAS in its own; the
// routes and the finalize are the same ops).
TEST(LongcatFlash, GroupedExpertsGiveTheOneByOneLogits) {
  for (models::MoeExperts experts : {models::MoeExperts::kFused, models::MoeExperts::kGrouped}) {
    for (int tp : {1, 2}) {
      testing::PiecePipeline p;
      ASSERT_TRUE(p.Open(testing::TinyLongcatFlashCheckpointDir(), tp, 1, {0, 2}, experts).ok());
      auto run = Generate(p);
      ASSERT_TRUE(run.ok()) << run.status();
      const Generated& one = SingleRank();
      const std::string what = std::string(models::MoeExpertsName(experts)) + " at TP " + std::to_string(tp);
      EXPECT_EQ(run->tokens, one.tokens) << what;
      for (size_t i = 0; i < one.logits.size(); ++i) {
        EXPECT_LE(testing::MaxRelativeError(run->logits[i], one.logits[i]), 1e-5) << what << ", logits " << i;
      }
    }
  }
}

using Param = std::tuple<int, int, int>;  // tp, attn_dp, pp
class LongcatFlashSplits : public ::testing::TestWithParam<Param> {};

TEST_P(LongcatFlashSplits, GreedyTokensAndLogitsEqualOneRank) {
  const auto& [tp, dp, pp] = GetParam();
  testing::PiecePipeline p;
  ASSERT_TRUE(p.Open(testing::TinyLongcatFlashCheckpointDir(), tp, dp, pp == 2 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 2}).ok());
  auto run = Generate(p);
  ASSERT_TRUE(run.ok()) << run.status();
  const Generated& one = SingleRank();
  EXPECT_EQ(run->tokens, one.tokens);
  ASSERT_EQ(run->logits.size(), one.logits.size());
  for (size_t i = 0; i < one.logits.size(); ++i) {
    const double err = testing::MaxRelativeError(run->logits[i], one.logits[i]);
    if (tp == 1) {
      EXPECT_EQ(err, 0.0) << "logits " << i << ": a pure pipeline split must be bit for bit one rank";
    } else {
      EXPECT_LE(err, 1e-5) << "logits " << i;
    }
  }
}

std::string SplitName(const ::testing::TestParamInfo<Param>& info) {
  const auto& [tp, dp, pp] = info.param;
  return "tp" + std::to_string(tp) + "_dp" + std::to_string(dp) + "_pp" + std::to_string(pp);
}

INSTANTIATE_TEST_SUITE_P(Grid, LongcatFlashSplits,
                         ::testing::Values(Param{1, 1, 2}, Param{2, 1, 1}, Param{2, 1, 2}, Param{4, 1, 1},
                                           Param{2, 2, 1}, Param{2, 2, 2}, Param{4, 2, 2}),
                         SplitName);

}  // namespace
}  // namespace seam

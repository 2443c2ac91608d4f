// Qwen3-MoE's last layer hands its MoE finalize to the final norm
// (ModelOptions::defer_moe_finalize, on by default): the final norm runs
// finalize + sum + residual add + norm fused. Against the same layout with
// the handoff off: bit for bit in fp32 at every TP (at TP 1 the fused
// finalize adds a row's experts in the order the MoE block does, in fp32; at
// TP > 1 the producer's finalize runs before the one all-reduce, as on the
// plain path), and the same greedy tokens everywhere. In bf16 the fused finalize keeps fp32 where the unfused one
// rounds after each expert, so the logits differ: the handoff really ran.
// Every way of running the experts (ModelOptions::moe_experts, on the host:
// per expert, or grouped or fused through the device ops' CPU reference)
// holds all of this, and they agree with each other within 1e-5 with the
// same greedy tokens.
#include <cstring>
#include <tuple>

#include <gtest/gtest.h>

#include "seam/runtime/generator.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::MaxRelativeError;
using testing::PromptTokens;
using testing::TinyCheckpointDir;

struct Outcome {
  std::vector<Tensor> logits;
  std::vector<std::vector<int32_t>> greedy;
};

Outcome RunOn(int tp, int attn_dp, boundary::ReductionPolicy policy, bool defer, DType dtype = DType::kF32,
              models::MoeExperts experts = models::MoeExperts::kAuto) {
  Outcome run;
  StageGroupOptions options;
  options.model.defer_moe_finalize = defer;
  options.model.moe_experts = experts;
  options.model.dtype = dtype;
  auto group = StageGroup::Create(TinyCheckpointDir(true), tp, attn_dp, policy, options);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return run;
  const std::vector<std::vector<int32_t>> prompts = {PromptTokens(1, 5, 128), PromptTokens(2, 9, 128),
                                                     PromptTokens(3, 3, 128)};
  std::vector<models::SequenceStep> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back(models::SequenceStep{100 + i, prompts[i], 0, static_cast<int>(i) % attn_dp});
  auto logits = (*group)->Step(batch, /*all_logits=*/true);
  EXPECT_TRUE(logits.ok()) << logits.status();
  if (!logits.ok()) return run;
  run.logits = *logits;
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_TRUE((*group)->Free(100 + i).ok());
  Generator generator(group->get());
  GenerationOptions g;
  g.max_new_tokens = 6;
  g.eos_token_id = -1;
  auto generated = generator.Generate(prompts, g);
  EXPECT_TRUE(generated.ok()) << generated.status();
  if (generated.ok()) run.greedy = generated->tokens;
  return run;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

using Param = std::tuple<std::pair<int, int>, boundary::ReductionPolicy, models::MoeExperts>;
class Qwen3MoeDeferredFinalize : public ::testing::TestWithParam<Param> {};

TEST_P(Qwen3MoeDeferredFinalize, LogitsAndTokensMatchTheUndeferredRun) {
  const auto [layout, policy, experts] = GetParam();
  const Outcome deferred = RunOn(layout.first, layout.second, policy, true, DType::kF32, experts);
  const Outcome plain = RunOn(layout.first, layout.second, policy, false, DType::kF32, experts);
  ASSERT_EQ(deferred.logits.size(), 3u);
  ASSERT_EQ(plain.logits.size(), 3u);
  double worst = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(SameBits(deferred.logits[i], plain.logits[i])) << "prompt " << i;
    worst = std::max(worst, MaxRelativeError(deferred.logits[i], plain.logits[i]));
  }
  EXPECT_EQ(worst, 0.0);
  EXPECT_EQ(deferred.greedy, plain.greedy);
}

// Grouped against per expert: the same products summed in other orders
// (OpenBLAS's blocked sgemm per expert, the reference's index order per
// pair), so within 1e-5 of the logits' scale, and the same greedy tokens.
TEST_P(Qwen3MoeDeferredFinalize, GroupedExpertsMatchPerExpert) {
  const auto [layout, policy, experts] = GetParam();
  if (experts == models::MoeExperts::kPerExpert) GTEST_SKIP() << "the baseline";
  const Outcome grouped = RunOn(layout.first, layout.second, policy, true, DType::kF32, experts);
  const Outcome per_expert = RunOn(layout.first, layout.second, policy, true, DType::kF32,
                                   models::MoeExperts::kPerExpert);
  ASSERT_EQ(grouped.logits.size(), 3u);
  ASSERT_EQ(per_expert.logits.size(), 3u);
  double worst = 0;
  for (size_t i = 0; i < 3; ++i) worst = std::max(worst, MaxRelativeError(grouped.logits[i], per_expert.logits[i]));
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(worst, 0) << "the grouped run's logits are the per-expert run's bit for bit: did it group?";
  EXPECT_EQ(grouped.greedy, per_expert.greedy);
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [layout, policy, experts] = info.param;
  std::string p = boundary::ReductionPolicyName(policy);
  for (char& c : p) {
    if (c == '+') c = '_';
  }
  std::string e = models::MoeExpertsName(experts);
  for (char& c : e) {
    if (c == '-') c = '_';
  }
  return "tp" + std::to_string(layout.first) + "_dp" + std::to_string(layout.second) + "_" + p + "_" + e;
}

// 4 layouts × 2 policies × 3 ways to run the experts = 24 cases, each bit for bit.
INSTANTIATE_TEST_SUITE_P(Layouts, Qwen3MoeDeferredFinalize,
                         ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1),
                                                              std::make_pair(2, 2), std::make_pair(4, 2)),
                                            ::testing::Values(boundary::ReductionPolicy::kAr,
                                                              boundary::ReductionPolicy::kAuto),
                                            ::testing::Values(models::MoeExperts::kPerExpert,
                                                              models::MoeExperts::kGrouped,
                                                              models::MoeExperts::kFused)),
                         Name);

TEST(Qwen3MoeDeferredFinalizeBf16, TheFusedFinalizeRan) {
  const Outcome deferred = RunOn(1, 1, boundary::ReductionPolicy::kAr, true, DType::kBF16);
  const Outcome plain = RunOn(1, 1, boundary::ReductionPolicy::kAr, false, DType::kBF16);
  ASSERT_EQ(deferred.logits.size(), 3u);
  ASSERT_EQ(plain.logits.size(), 3u);
  bool any_differs = false;
  for (size_t i = 0; i < 3; ++i) any_differs |= !SameBits(deferred.logits[i], plain.logits[i]);
  EXPECT_TRUE(any_differs) << "the bf16 logits are the undeferred run's bit for bit: the handoff did not run";
}

}  // namespace
}  // namespace seam::runtime

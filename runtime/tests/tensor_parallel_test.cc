// Distributed runs of the tiny Qwen3 and Qwen3-MoE models (TP 2 and 4, with
// and without attention DP, every reduction policy the architecture resolves
// to) against the single-rank run. Logits agree within 1e-5 of their scale,
// not bit for bit: each partial o_proj/down_proj/expert output is an fp32 sum
// over a slice of the inner dimension, and the collectives add the slices in
// another order than the single-rank matmul does. Greedy tokens must be identical.
#include <map>
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

constexpr double kTolerance = 1e-5;

std::vector<std::vector<int32_t>> Prompts() {
  return {PromptTokens(1, 5, 128), PromptTokens(2, 9, 128), PromptTokens(3, 3, 128)};
}

struct Outcome {
  std::vector<Tensor> prefill_logits;      // every token of each prompt
  std::vector<std::vector<int32_t>> greedy;  // 6 greedy tokens per prompt
};

Outcome RunOn(bool moe, int tp, int attn_dp, boundary::ReductionPolicy policy) {
  Outcome run;
  auto group = StageGroup::Create(TinyCheckpointDir(moe), tp, attn_dp, policy);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return run;
  std::vector<models::SequenceStep> batch;
  const auto prompts = Prompts();
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back(models::SequenceStep{1000 + i, prompts[i], 0, static_cast<int>(i) % attn_dp});
  auto logits = (*group)->Step(batch, /*all_logits=*/true);
  EXPECT_TRUE(logits.ok()) << logits.status();
  if (!logits.ok()) return run;
  run.prefill_logits = *logits;
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_TRUE((*group)->Free(1000 + i).ok());

  Generator generator(group->get());
  GenerationOptions options;
  options.max_new_tokens = 6;
  options.eos_token_id = -1;
  auto generated = generator.Generate(prompts, options);
  EXPECT_TRUE(generated.ok()) << generated.status();
  if (generated.ok()) run.greedy = generated->tokens;
  return run;
}

const Outcome& Reference(bool moe) {
  static std::map<bool, Outcome> cache;
  auto it = cache.find(moe);
  if (it == cache.end()) it = cache.emplace(moe, RunOn(moe, 1, 1, boundary::ReductionPolicy::kAr)).first;
  return it->second;
}

using Param = std::tuple<bool, std::pair<int, int>, boundary::ReductionPolicy>;
class TensorParallel : public ::testing::TestWithParam<Param> {};

TEST_P(TensorParallel, LogitsMatchSingleRankAndGreedyTokensAreIdentical) {
  const auto [moe, layout, policy] = GetParam();
  const auto [tp, attn_dp] = layout;
  const Outcome& reference = Reference(moe);
  ASSERT_EQ(reference.prefill_logits.size(), 3u);
  const Outcome run = RunOn(moe, tp, attn_dp, policy);
  ASSERT_EQ(run.prefill_logits.size(), 3u);
  double worst = 0.0;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(run.prefill_logits[i].shape(), reference.prefill_logits[i].shape());
    worst = std::max(worst, MaxRelativeError(run.prefill_logits[i], reference.prefill_logits[i]));
  }
  EXPECT_LE(worst, kTolerance);
  std::printf("%s tp=%d attn_dp=%d %s: max relative logit error vs TP 1 = %.3g\n", moe ? "qwen3_moe" : "qwen3", tp,
              attn_dp, boundary::ReductionPolicyName(policy), worst);
  EXPECT_EQ(run.greedy, reference.greedy);
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [moe, layout, policy] = info.param;
  std::string p = boundary::ReductionPolicyName(policy);
  for (char& c : p) {
    if (c == '+') c = '_';
  }
  return std::string(moe ? "moe" : "dense") + "_tp" + std::to_string(layout.first) + "_dp" +
         std::to_string(layout.second) + "_" + p;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TensorParallel,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(std::make_pair(2, 1), std::make_pair(2, 2), std::make_pair(4, 1),
                                         std::make_pair(4, 2)),
                       ::testing::Values(boundary::ReductionPolicy::kAr, boundary::ReductionPolicy::kAuto)),
    Name);

}  // namespace
}  // namespace seam::runtime

// The generation loop: greedy tokens are the argmax of the logits they came
// from, a prompt batch of different lengths decodes like each prompt alone,
// seeded sampling is reproducible, EOS and max_new_tokens stop a sequence,
// and finished sequences give their KV blocks back.
#include "seam/runtime/generator.h"

#include <gtest/gtest.h>

#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::PromptTokens;
using testing::TinyCheckpointDir;

int32_t ArgmaxOf(const Tensor& row) {
  const std::vector<float> v = row.ToFloats();
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class GeneratorTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto group = StageGroup::Create(TinyCheckpointDir(GetParam()), 2, 2, boundary::ReductionPolicy::kAuto);
    ASSERT_TRUE(group.ok()) << group.status();
    group_ = std::move(*group);
  }
  std::unique_ptr<StageGroup> group_;
};

TEST_P(GeneratorTest, GreedyBatchEqualsEachPromptAloneAndFreesItsBlocks) {
  const int64_t free_before = group_->FreeBlocks(0) + group_->FreeBlocks(1);
  const std::vector<std::vector<int32_t>> prompts{PromptTokens(1, 3, 128), PromptTokens(2, 12, 128),
                                                  PromptTokens(3, 7, 128)};
  Generator generator(group_.get());
  GenerationOptions options;
  options.max_new_tokens = 5;
  options.eos_token_id = -1;
  options.return_logits = true;
  auto batched = generator.Generate(prompts, options);
  ASSERT_TRUE(batched.ok()) << batched.status();
  for (size_t p = 0; p < prompts.size(); ++p) {
    ASSERT_EQ(batched->tokens[p].size(), 5u);
    ASSERT_EQ(batched->logits[p].size(), 5u);
    for (size_t s = 0; s < 5; ++s) EXPECT_EQ(batched->tokens[p][s], ArgmaxOf(batched->logits[p][s]));
    auto alone = generator.Generate({prompts[p]}, options);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(alone->tokens[0], batched->tokens[p]) << "prompt " << p;
  }
  EXPECT_EQ(group_->FreeBlocks(0) + group_->FreeBlocks(1), free_before);
}

TEST_P(GeneratorTest, SeededSamplingIsReproducible) {
  const std::vector<std::vector<int32_t>> prompts{PromptTokens(4, 5, 128), PromptTokens(5, 2, 128)};
  Generator generator(group_.get());
  GenerationOptions options;
  options.max_new_tokens = 8;
  options.eos_token_id = -1;
  options.sampling = kernels::SamplingParams{0.8f, 20, 0.9f, 1234};
  auto first = generator.Generate(prompts, options);
  auto second = generator.Generate(prompts, options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->tokens, second->tokens);
  for (const auto& tokens : first->tokens) {
    ASSERT_EQ(tokens.size(), 8u);
    for (int32_t t : tokens) EXPECT_TRUE(t >= 0 && t < 128) << t;
  }
}

TEST_P(GeneratorTest, EosStopsOnlyTheSequenceThatProducedIt) {
  const std::vector<std::vector<int32_t>> prompts{PromptTokens(6, 4, 128), PromptTokens(7, 9, 128)};
  Generator generator(group_.get());
  GenerationOptions options;
  options.max_new_tokens = 4;
  options.eos_token_id = -1;
  auto free_run = generator.Generate(prompts, options);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  // Make the second token of prompt 0 the EOS token (unless prompt 1 meets it first).
  const int32_t eos = free_run->tokens[0][1];
  options.eos_token_id = eos;
  auto stopped = generator.Generate(prompts, options);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& full = free_run->tokens[p];
    const size_t stop = std::find(full.begin(), full.end(), eos) - full.begin();
    const std::vector<int32_t> want(full.begin(), full.begin() + std::min(full.size(), stop + 1));
    EXPECT_EQ(stopped->tokens[p], want) << "prompt " << p;
  }
  EXPECT_LE(stopped->tokens[0].size(), 2u);
}

TEST_P(GeneratorTest, EmptyPromptIsInvalid) {
  Generator generator(group_.get());
  auto result = generator.Generate({{1, 2}, {}}, GenerationOptions{});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "prompt 1 is empty");
}

INSTANTIATE_TEST_SUITE_P(Models, GeneratorTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "moe" : "dense"; });

}  // namespace
}  // namespace seam::runtime

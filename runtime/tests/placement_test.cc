// Where a stage group places sequences (the DP group a step names) and how
// big its KV caches are (from a byte budget on the host; from memory on GPUs).
#include <gtest/gtest.h>

#include "absl/strings/cord.h"
#include "seam/core/status.h"
#include "seam/runtime/kv_sizing.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::PromptTokens;
using testing::TinyCheckpointDir;

std::unique_ptr<StageGroup> MakeGroup(int tp, int attn_dp, StageGroupOptions options = {}) {
  auto group = StageGroup::Create(TinyCheckpointDir(false), tp, attn_dp, boundary::ReductionPolicy::kAuto, options);
  EXPECT_TRUE(group.ok()) << group.status();
  return group.ok() ? std::move(*group) : nullptr;
}

models::SequenceStep On(uint64_t sequence, int length, int dp_group) {
  models::SequenceStep s{sequence, PromptTokens(static_cast<int>(sequence), length, 128), 0};
  s.dp_group = dp_group;
  return s;
}

TEST(StagePlacement, TheStepsDpGroupDecidesWhereASequenceLives) {
  auto group = MakeGroup(2, 2);
  ASSERT_NE(group, nullptr);
  // Round-robin would put 1 on group 0 and 2 on group 1; the steps say otherwise.
  ASSERT_TRUE(group->Step({On(1, 9, 1), On(2, 3, 1), On(3, 5, 0)}, false).ok());
  EXPECT_EQ(group->DpGroupOf(1), 1);
  EXPECT_EQ(group->DpGroupOf(2), 1);
  EXPECT_EQ(group->DpGroupOf(3), 0);
  EXPECT_LT(group->FreeBlocks(1), group->FreeBlocks(0));  // 9 + 3 tokens against 5, two blocks against one
}

TEST(StagePlacement, AStepThatMovesASequenceIsRefusedBeforeAnyRankRuns) {
  auto group = MakeGroup(2, 2);
  ASSERT_NE(group, nullptr);
  ASSERT_TRUE(group->Step({On(1, 4, 0)}, false).ok());
  models::SequenceStep next{1, {5}, 4};
  next.dp_group = 1;
  auto moved = group->Step({next}, false);
  ASSERT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument) << moved.status();
  EXPECT_NE(moved.status().message().find("lives on DP group 0"), std::string::npos) << moved.status();
  auto outside = group->Step({On(2, 4, 2)}, false);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument) << outside.status();
  next.dp_group = 0;
  EXPECT_TRUE(group->Step({next}, false).ok());  // the group is still usable
}

// The coordinator places; a stage of several DP groups never does.
TEST(StagePlacement, AStepThatNamesNoDpGroupIsRefusedWhereThereAreSeveral) {
  auto group = MakeGroup(2, 2);
  ASSERT_NE(group, nullptr);
  auto unnamed = group->Step({On(1, 4, 0), On(2, 4, -1)}, false);
  ASSERT_EQ(unnamed.status().code(), absl::StatusCode::kInvalidArgument) << unnamed.status();
  EXPECT_NE(unnamed.status().message().find("sequence 2 names no DP group"), std::string::npos) << unnamed.status();
  EXPECT_EQ(group->DpGroupOf(1), -1);  // nothing was placed
  EXPECT_TRUE(group->Step({On(1, 4, 0), On(2, 4, 1)}, false).ok());
}

// A plan is data: it says what the step does before it runs, and runs only
// against the state it was made in.
TEST(StagePlan, APlanRunsOnceAndOnlyAgainstTheStateItSaw) {
  auto group = MakeGroup(2, 2);
  ASSERT_NE(group, nullptr);
  const std::vector<models::SequenceStep> step{On(1, 5, 1), On(2, 3, 0)};
  auto plan = group->Plan(step, false, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ToString(),
            "2 sequences; dp 0: 3 rows [2*@0+3], 1 blocks, 0 state slots; dp 1: 5 rows [1*@0+5], 1 blocks, 0 state "
            "slots; eager (graphs off: the group computes on the host), ORDINARY; in none; out logits");
  EXPECT_EQ(group->DpGroupOf(1), -1);  // planning changes nothing
  auto out = group->Run(*plan, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->logits.size(), 2u);
  EXPECT_EQ(group->DpGroupOf(1), 1);
  auto again = group->Run(*plan, {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
}

// A step of more token rows than the stage's max step tokens is refused.
TEST(StagePlan, AStepLargerThanTheStageTakesIsRefused) {
  StageGroupOptions options;
  options.kv.max_step_tokens = 8;
  auto group = MakeGroup(1, 1, options);
  ASSERT_NE(group, nullptr);
  auto big = group->Step({On(1, 6, 0), On(2, 3, 0)}, false);
  ASSERT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument) << big.status();
  EXPECT_EQ(big.status().message(), "the step carries 9 token rows, more than this stage's 8 (its max step tokens)");
  EXPECT_EQ(group->Limits().max_step_tokens, 8);
  EXPECT_EQ(group->Limits().state_slots_per_dp_group, 0);
  EXPECT_TRUE(group->Step({On(1, 6, 0)}, false).ok());
}

TEST(StageKvCapacity, HostCachesComeFromTheByteBudget) {
  StageGroupOptions options;
  // TP 2, attention DP 1: each rank holds 1 KV head x 16 dims x 2 layers, k and v, f32 = 256 bytes a token.
  options.kv.cache_bytes = 256 * 16 * 10;  // ten blocks of 16 tokens
  auto group = MakeGroup(2, 1, options);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->KvBlockSize(), 16);
  EXPECT_EQ(group->KvBlocksPerDpGroup(), 10);
  EXPECT_EQ(group->FreeBlocks(0), 10);
}

TEST(KvSizing, GpuBudgetIsTheFractionLessWeightsAndActivations) {
  KvSizing sizing;
  sizing.from_gpu_memory = true;
  sizing.memory_fraction = 0.5;
  const int64_t gib = int64_t{1} << 30;
  // 0.5 x 100 GiB = 50 GiB; 20 GiB of weights, 5 GiB of activations: 25 GiB of KV.
  auto budget = KvBudgetBytes(sizing, Device::CUDA(0), 20 * gib, 100 * gib, 80 * gib, 5 * gib);
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(*budget, 25 * gib);
  // Another process holds most of the GPU: never more than is free less the reserve.
  budget = KvBudgetBytes(sizing, Device::CUDA(0), 20 * gib, 100 * gib, 10 * gib, 5 * gib);
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(*budget, 5 * gib);
  auto none = KvBudgetBytes(sizing, Device::CUDA(0), 48 * gib, 100 * gib, 50 * gib, 5 * gib);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition) << none.status();
  EXPECT_NE(none.status().message().find("--kv-memory-fraction"), std::string::npos) << none.status();
  sizing.cache_bytes = gib;
  sizing.from_gpu_memory = false;  // a byte budget instead of the fraction
  budget = KvBudgetBytes(sizing, Device::CUDA(0), 48 * gib, 100 * gib, 50 * gib, 5 * gib);
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(*budget, gib);
}

TEST(KvSizing, ActivationReserveGrowsWithTheStep) {
  weights::ModelConfig c = testing::TinyConfig(false);
  const int64_t small = ActivationReserveBytes(c, 1, 1, DType::kF32, 16);
  const int64_t large = ActivationReserveBytes(c, 1, 1, DType::kF32, 4096);
  EXPECT_GT(large, small);
  EXPECT_GE(small, int64_t{256} << 20);  // the workspace share
}

TEST(StageErrors, TheFailingTpRankIsReadFromTheStatus) {
  absl::Status s = absl::InternalError("boom");
  EXPECT_FALSE(FailedTpRank(s).has_value());
  s.SetPayload("type.seam.dev/tp_rank", absl::Cord("1"));
  EXPECT_EQ(FailedTpRank(Annotate(s, "loading the stage")), 1);
}

}  // namespace
}  // namespace seam::runtime

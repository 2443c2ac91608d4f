// KV cache correctness through the whole model: prefill followed by decode
// steps equals one prefill of the whole sequence; a batch of sequences of
// different lengths equals each sequence alone; decode batches with fewer
// sequences than attention-DP groups; a full cache refuses the step.
#include <gtest/gtest.h>

#include "seam/models/qwen3_model.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::MaxRelativeError;
using testing::PromptTokens;
using testing::TinyCheckpointDir;

// Same-rank runs differ only in how sgemm blocks rows of different counts.
constexpr double kTolerance = 1e-5;

std::unique_ptr<StageGroup> MakeGroup(bool moe, int tp, int attn_dp, StageGroupOptions options = {}) {
  auto group = StageGroup::Create(TinyCheckpointDir(moe), tp, attn_dp, boundary::ReductionPolicy::kAuto, options);
  EXPECT_TRUE(group.ok()) << group.status();
  return group.ok() ? std::move(*group) : nullptr;
}

class KvDecode : public ::testing::TestWithParam<bool> {};

TEST_P(KvDecode, PrefillThenDecodeEqualsOnePrefill) {
  auto group = MakeGroup(GetParam(), 2, 1);
  ASSERT_NE(group, nullptr);
  const std::vector<int32_t> tokens = PromptTokens(5, 24, 128);  // crosses a 16-token block
  auto whole = group->Step({models::SequenceStep{1, tokens, 0}}, true);
  ASSERT_TRUE(whole.ok()) << whole.status();

  const int prompt = 13;
  auto first = group->Step({models::SequenceStep{2, {tokens.begin(), tokens.begin() + prompt}, 0}}, false);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_LE(MaxRelativeError((*first)[0], (*whole)[0].Rows(prompt - 1, 1).Clone()), kTolerance);
  for (int p = prompt; p < 24; ++p) {
    auto step = group->Step({models::SequenceStep{2, {tokens[p]}, p}}, false);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_LE(MaxRelativeError((*step)[0], (*whole)[0].Rows(p, 1).Clone()), kTolerance) << "position " << p;
  }
}

TEST_P(KvDecode, MixedLengthBatchEqualsEachSequenceAlone) {
  auto group = MakeGroup(GetParam(), 2, 2);
  ASSERT_NE(group, nullptr);
  const std::vector<int> lengths{7, 1, 18, 4};
  std::vector<models::SequenceStep> batch;
  for (size_t i = 0; i < lengths.size(); ++i) {
    batch.push_back(models::SequenceStep{10 + i, PromptTokens(20 + i, lengths[i], 128), 0, static_cast<int>(i % 2)});
  }
  auto together = group->Step(batch, true);
  ASSERT_TRUE(together.ok()) << together.status();
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto alone = group->Step({models::SequenceStep{50 + i, batch[i].tokens, 0, static_cast<int>(i % 2)}}, true);
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ((*together)[i].shape(), (Shape{lengths[i], 128}));
    EXPECT_LE(MaxRelativeError((*together)[i], (*alone)[0]), kTolerance) << "sequence " << i;
  }
}

TEST_P(KvDecode, DecodeWithFewerSequencesThanDpGroups) {
  auto reference = MakeGroup(GetParam(), 1, 1);
  auto group = MakeGroup(GetParam(), 4, 4);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(group, nullptr);
  const std::vector<int32_t> a = PromptTokens(31, 6, 128), b = PromptTokens(32, 11, 128);
  // Two sequences on four DP groups: groups 2 and 3 run every step with 0 rows.
  const auto placed = [](std::vector<models::SequenceStep> steps) {  // sequence 1 on DP group 0, 2 on 1
    for (models::SequenceStep& s : steps) s.dp_group = static_cast<int>(s.sequence) - 1;
    return steps;
  };
  const std::vector<models::SequenceStep> prefill{models::SequenceStep{1, a, 0}, models::SequenceStep{2, b, 0}};
  ASSERT_TRUE(reference->Step(prefill, false).ok());
  ASSERT_TRUE(group->Step(placed(prefill), false).ok());
  EXPECT_EQ(group->DpGroupOf(1), 0);
  EXPECT_EQ(group->DpGroupOf(2), 1);
  for (int i = 0; i < 4; ++i) {
    std::vector<models::SequenceStep> step{models::SequenceStep{1, {static_cast<int32_t>(40 + i)}, 6 + i}};
    if (i % 2 == 0) step.push_back(models::SequenceStep{2, {static_cast<int32_t>(60 + i)}, 11 + i / 2});
    auto want = reference->Step(step, false);
    auto got = group->Step(placed(step), false);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t s = 0; s < step.size(); ++s) {
      EXPECT_LE(MaxRelativeError((*got)[s], (*want)[s]), kTolerance) << "step " << i << " sequence " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, KvDecode, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "moe" : "dense"; });

TEST(StageGroupCache, FullCacheRefusesTheStepAndTheGroupStaysUsable) {
  StageGroupOptions options;
  // Per rank at TP 2 / attention TP 2: 1 KV head, 2 layers, 16 × 1 × 16 × 4 bytes × 2 (k, v) per layer.
  options.kv.cache_bytes = 4 * 2 * 2 * 16 * 16 * 4;  // 4 blocks of 16 tokens
  auto group = MakeGroup(false, 2, 1, options);
  ASSERT_NE(group, nullptr);
  ASSERT_TRUE(group->Step({models::SequenceStep{1, PromptTokens(1, 40, 128), 0}}, false).ok());  // 3 blocks
  auto refused = group->Step({models::SequenceStep{2, PromptTokens(2, 20, 128), 0}}, false);    // needs 2
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(refused.status().message(), "KV cache full on DP group 0: the step needs 2 more blocks, 1 of 4 are free");
  EXPECT_EQ(group->DpGroupOf(2), -1);
  ASSERT_TRUE(group->Free(1).ok());
  EXPECT_EQ(group->FreeBlocks(0), 4);
  EXPECT_TRUE(group->Step({models::SequenceStep{2, PromptTokens(2, 20, 128), 0}}, false).ok());
}

TEST(StageGroupCache, ModelForwardReportsAFullCacheItself) {
  auto checkpoint = weights::Checkpoint::Open(TinyCheckpointDir(false));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto topology = boundary::Topology::Make(1, 1, 0);
  auto model = models::Qwen3Model::Load(**checkpoint, models::ModelOptions{*topology, boundary::ReductionPolicy::kAr});
  ASSERT_TRUE(model.ok()) << model.status();
  models::KvCacheOptions cache_options;
  cache_options.budget_bytes = (*model)->layers() * 2 * 16 * 2 * 16 * 4;  // one block
  auto cache = (*model)->MakeCache(cache_options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  boundary::ForwardBatch batch(1, boundary::BatchVariant::kOrdinary, *topology, {17});
  models::StepInput input{{models::SequenceStep{1, PromptTokens(3, 17, 128), 0}}, false};
  auto logits = (*model)->Forward(batch, input, **cache);
  ASSERT_EQ(logits.status().code(), absl::StatusCode::kResourceExhausted) << logits.status();
  EXPECT_EQ(logits.status().message(), "KV cache full: the step needs 2 more blocks, 1 of 1 are free");
}

}  // namespace
}  // namespace seam::runtime

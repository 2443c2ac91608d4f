// The coordinator's limits come from the stages' reports: the least over the
// stages, lowered (never raised) by the operator's caps, refused when a stage
// reports none or the block sizes differ.
#include "service/pipeline_limits.h"

#include <gtest/gtest.h>

namespace seam::coordinator {
namespace {

v1::StageStatus Stage(uint64_t step_tokens, uint64_t blocks, uint64_t max_context, uint64_t state_slots = 0,
                      std::vector<uint64_t> buckets = {1, 2, 4}) {
  v1::StageStatus s;
  s.set_state(v1::STAGE_STATE_READY);
  v1::StageLimits* l = s.mutable_limits();
  l->set_max_step_tokens(step_tokens);
  l->set_kv_blocks_per_dp_group(blocks);
  l->set_kv_block_size(16);
  l->set_state_slots_per_dp_group(state_slots);
  l->set_max_context(max_context);
  for (uint64_t b : buckets) l->add_graph_buckets(b);
  return s;
}

TEST(PipelineLimits, TheLeastOverTheStagesBoundsEveryFigure) {
  LimitCaps none;
  none.max_prompt_tokens = 0;
  auto l = DerivePipelineLimits({Stage(8192, 500, 4096, 0, {1, 2, 4, 8}), Stage(4096, 900, 2048, 64, {2, 4})},
                                {"a:1", "b:2"}, none);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_step_tokens, 4096);
  EXPECT_EQ(l->kv_blocks_per_dp_group, 500);
  EXPECT_EQ(l->kv_block_size, 16);
  EXPECT_EQ(l->max_sequences_per_dp_group, 64);  // only the stage with Mamba state bounds it
  EXPECT_EQ(l->max_context, 2048);
  EXPECT_EQ(l->max_prompt_tokens, 2047);  // room for one generated token
  EXPECT_EQ(l->graph_buckets, (std::vector<int64_t>{2, 4}));
  weights::ModelConfig model;
  model.vocab_size = 1000;
  model.max_position_embeddings = 40960;
  const RequestLimits r = RequestLimitsOf(*l, model);
  EXPECT_EQ(r.max_positions, 40960);  // past the stages' KV the scheduler refuses, naming the KV budget
  EXPECT_EQ(r.max_prompt_tokens, 2047);
  EXPECT_EQ(r.vocab_size, 1000);
  EXPECT_EQ(r.max_context, 2048);  // what an API advertises
}

TEST(PipelineLimits, CapsOnlyLower) {
  LimitCaps caps;
  caps.max_batch_tokens = 1024;
  caps.kv_blocks = 10000;  // above the stages': theirs stands
  caps.max_prompt_tokens = 512;
  auto l = DerivePipelineLimits({Stage(8192, 500, 4096)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_step_tokens, 1024);
  EXPECT_EQ(l->kv_blocks_per_dp_group, 500);
  EXPECT_EQ(l->max_prompt_tokens, 512);
  caps.max_batch_tokens = 100000;
  caps.max_prompt_tokens = kDefaultMaxPromptTokens;
  l = DerivePipelineLimits({Stage(8192, 500, 4096)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_step_tokens, 8192);
  EXPECT_EQ(l->max_prompt_tokens, kDefaultMaxPromptTokens);
}

// --max-model-len and --max-num-seqs (seam serve's vLLM flags) lower the
// context and the sequences per DP group; above the stages' they are theirs.
TEST(PipelineLimits, MaxModelLenAndMaxNumSeqsOnlyLower) {
  LimitCaps caps;
  caps.max_context = 100;
  caps.max_sequences_per_dp_group = 3;
  auto l = DerivePipelineLimits({Stage(8192, 500, 4096)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_context, 100);
  EXPECT_EQ(l->max_prompt_tokens, 99);
  EXPECT_EQ(l->max_sequences_per_dp_group, 3);  // the stages set no bound: the cap is one
  caps.max_context = 100000;
  caps.max_sequences_per_dp_group = 500;
  l = DerivePipelineLimits({Stage(8192, 500, 4096, 64)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_context, 4096);
  EXPECT_EQ(l->max_sequences_per_dp_group, 64);
}

// Chunked prefill (the default) takes prompts up to the context, whatever a
// microbatch holds; without it a prompt is prefilled whole in one microbatch.
TEST(PipelineLimits, ChunkedPrefillBoundsPromptsByTheContextNotByAMicrobatch) {
  LimitCaps caps;
  caps.max_batch_tokens = 1024;
  auto l = DerivePipelineLimits({Stage(8192, 500, 4096)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_prompt_tokens, 4095);
  caps.chunked_prefill = false;
  l = DerivePipelineLimits({Stage(8192, 500, 4096)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_prompt_tokens, 1024);
  caps.max_batch_tokens = 0;
  l = DerivePipelineLimits({Stage(8192, 500, 4096)}, {"a:1"}, caps);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_prompt_tokens, kDefaultMaxPromptTokens);
}

TEST(PipelineLimits, AStageWithoutLimitsOrWithOtherBlocksIsRefused) {
  v1::StageStatus loading;
  loading.set_state(v1::STAGE_STATE_LOADING);
  auto l = DerivePipelineLimits({Stage(8192, 500, 4096), loading}, {"a:1", "b:2"}, LimitCaps{});
  ASSERT_EQ(l.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(l.status().message(), "stage b:2 reports no step limits (state STAGE_STATE_LOADING)");
  v1::StageStatus other = Stage(8192, 500, 4096);
  other.mutable_limits()->set_kv_block_size(32);
  l = DerivePipelineLimits({Stage(8192, 500, 4096), other}, {"a:1", "b:2"}, LimitCaps{});
  ASSERT_EQ(l.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(l.status().message(), "stage b:2 has KV blocks of 32 tokens, an earlier stage of 16");
}

}  // namespace
}  // namespace seam::coordinator

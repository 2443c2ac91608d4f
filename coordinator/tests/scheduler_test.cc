// Scheduler batching, admission and KV budget, driven iteration by iteration:
// pipeline kept full, one microbatch per sequence, FIFO, chunked prefill,
// DP placement, the wait-then-preempt policy and option checks.
#include "seam/coordinator/scheduler.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler_driver.h"

namespace seam::coordinator {
namespace {

using testing::IdsOf;
using testing::SchedulerDriver;
using testing::SmallOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SchedulerTest, KeepsEveryPipelineStageBusy) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 4;
  o.max_sequences_per_microbatch = 2;
  SchedulerDriver d(o);
  EXPECT_EQ(d.scheduler->options().max_inflight_microbatches, 4);
  for (int i = 0; i < 8; ++i) d.Submit("r" + std::to_string(i), 4, 4);
  std::vector<Microbatch> out;
  for (int i = 0; i < 4; ++i) out.push_back(d.MustNext());
  EXPECT_FALSE(d.scheduler->Next().has_value());
  EXPECT_EQ(d.scheduler->InFlightCount(), 4);
  for (const auto& mb : out) EXPECT_EQ(mb.num_sequences, 2);
  d.Complete(out[0]);
  // The freed slot: two decoding sequences over four slots, one a microbatch.
  Microbatch decode = d.MustNext();
  EXPECT_THAT(IdsOf(decode), ElementsAre("r0"));
  EXPECT_FALSE(decode.entries_by_group[0][0].is_prefill);
  EXPECT_EQ(decode.entries_by_group[0][0].start_position, 4);
  EXPECT_EQ(decode.entries_by_group[0][0].input_token, 7);
}

TEST(SchedulerTest, SequenceIsInAtMostOneInFlightMicrobatch) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 3;
  SchedulerDriver d(o);
  d.Submit("a", 4, 8);
  d.Submit("b", 4, 8);
  Microbatch first = d.MustNext();
  EXPECT_THAT(IdsOf(first), ElementsAre("a", "b"));
  EXPECT_FALSE(d.scheduler->Next().has_value()) << "both sequences are in flight";
  d.Complete(first);
  // Two decoding sequences over three slots: one microbatch each.
  EXPECT_THAT(IdsOf(d.MustNext()), ElementsAre("a"));
  EXPECT_THAT(IdsOf(d.MustNext()), ElementsAre("b"));
}

TEST(SchedulerTest, DecodeStepsAreSpreadOverThePipelinesMicrobatches) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 2;
  SchedulerDriver d(o);
  for (int i = 0; i < 8; ++i) d.Submit("s" + std::to_string(i), 3, 6);
  Microbatch prefill = d.MustNext();  // all eight admitted at once
  EXPECT_EQ(prefill.num_sequences, 8);
  d.Complete(prefill);
  // Eight decoding sequences, two stages: two microbatches of four in flight.
  Microbatch a = d.MustNext(), b = d.MustNext();
  EXPECT_EQ(a.num_sequences, 4);
  EXPECT_EQ(b.num_sequences, 4);
  EXPECT_FALSE(d.scheduler->Next().has_value());
  std::set<std::string> ids;
  for (const Microbatch* mb : {&a, &b}) {
    for (const std::string& id : IdsOf(*mb)) EXPECT_TRUE(ids.insert(id).second) << id << " twice";
  }
  EXPECT_EQ(ids.size(), 8u);
}

TEST(SchedulerTest, MicrobatchesCarryIncreasingSequenceNumbersAndPackedRows) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 2;
  o.max_sequences_per_microbatch = 2;
  SchedulerDriver d(o);
  for (const char* id : {"a", "b", "c"}) d.Submit(id, 5, 2);
  Microbatch m1 = d.MustNext();
  Microbatch m2 = d.MustNext();
  EXPECT_LT(m1.sequence_number, m2.sequence_number);
  EXPECT_NE(m1.id, m2.id);
  ASSERT_EQ(m1.entries_by_group[0].size(), 2u);
  EXPECT_EQ(m1.entries_by_group[0][0].row_offset, 0);
  EXPECT_EQ(m1.entries_by_group[0][1].row_offset, 5);
  EXPECT_EQ(m1.num_tokens, 10);
}

TEST(SchedulerTest, AdmitsFifoAndAHeadThatDoesNotFitBlocksTheRest) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 3;
  o.kv_blocks_per_dp_group = 4;
  o.max_sequences_per_microbatch = 1;
  SchedulerDriver d(o);
  d.Submit("a", 7, 1);   // reserves 2 blocks (8 tokens)
  d.Submit("b", 12, 1);  // needs 4 blocks (13 tokens)
  d.Submit("c", 1, 1);   // would fit, but waits behind b
  Microbatch ma = d.MustNext();
  EXPECT_THAT(IdsOf(ma), ElementsAre("a"));
  EXPECT_FALSE(d.scheduler->Next().has_value());
  EXPECT_EQ(d.scheduler->QueueDepth(), 2);
  d.Complete(ma);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 4);
  Microbatch mb = d.MustNext();
  EXPECT_THAT(IdsOf(mb), ElementsAre("b"));
  EXPECT_FALSE(d.scheduler->Next().has_value());
  d.Complete(mb);
  EXPECT_THAT(IdsOf(d.MustNext()), ElementsAre("c"));
}

TEST(SchedulerTest, KvBudgetBoundsAdmissionAndEveryBlockComesBack) {
  SchedulerOptions o = SmallOptions();
  o.kv_blocks_per_dp_group = 4;
  SchedulerDriver d(o);
  for (const char* id : {"a", "b", "c"}) d.Submit(id, 7, 1);
  Microbatch m = d.MustNext();
  EXPECT_THAT(IdsOf(m), ElementsAre("a", "b"));
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 0);
  EXPECT_EQ(d.scheduler->QueueDepth(), 1);
  EXPECT_EQ(d.scheduler->RunningCount(), 2);
  d.Complete(m);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 4);
  d.Drain();
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 4);
  EXPECT_EQ(d.scheduler->RunningCount(), 0);
  EXPECT_EQ(d.scheduler->QueueDepth(), 0);
}

// Stages that keep Mamba state hold a slot per sequence of a DP group: a
// request waits for a slot as it waits for blocks.
TEST(SchedulerTest, StateSlotsBoundTheSequencesOfADpGroup) {
  SchedulerOptions o = SmallOptions();
  o.max_sequences_per_dp_group = 2;
  SchedulerDriver d(o);
  for (const char* id : {"a", "b", "c"}) d.Submit(id, 4, 1);
  Microbatch m = d.MustNext();
  EXPECT_THAT(IdsOf(m), ElementsAre("a", "b"));
  EXPECT_EQ(d.scheduler->QueueDepth(), 1);
  d.Complete(m);  // a and b finish: their slots are free again
  Microbatch next = d.MustNext();
  EXPECT_THAT(IdsOf(next), ElementsAre("c"));
  o.max_sequences_per_dp_group = -1;
  EXPECT_THAT(Scheduler::Create(o).status().message(), HasSubstr("max_sequences_per_dp_group = -1"));
}

TEST(SchedulerTest, DecodeStepsAndNewPrefillsShareAMicrobatch) {
  SchedulerOptions o = SmallOptions();
  o.max_tokens_per_microbatch = 8;
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 16;
  SchedulerDriver d(o);
  d.Submit("a", 3, 4);
  d.Complete(d.MustNext());
  d.Submit("b", 10, 4);
  Microbatch m = d.MustNext();
  ASSERT_THAT(IdsOf(m), ElementsAre("a", "b"));
  const auto& e = m.entries_by_group[0];
  EXPECT_FALSE(e[0].is_prefill);
  EXPECT_TRUE(e[1].is_prefill);
  EXPECT_EQ(e[1].num_tokens, 7) << "the chunk is cut to the microbatch's remaining rows";
  EXPECT_FALSE(e[1].is_last_chunk);
}

TEST(SchedulerTest, AStepWithDecodeRowsTakesAtMostTheMixedPrefillTokens) {
  SchedulerOptions o = SmallOptions();
  o.max_tokens_per_microbatch = 64;
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 16;
  o.max_mixed_prefill_tokens = 10;
  SchedulerDriver d(o);
  d.Submit("a", 3, 8);
  d.Submit("b", 40, 4);
  Microbatch first = d.MustNext();  // no decode row yet: chunks up to the microbatch
  EXPECT_EQ(first.num_tokens, 3 + 16);
  d.Complete(first);
  Microbatch mixed = d.MustNext();  // a's decode row: b's chunk is cut to 10 prefill tokens
  const auto& e = mixed.entries_by_group[0];
  ASSERT_EQ(e.size(), 2u);
  EXPECT_FALSE(e[0].is_prefill);
  EXPECT_TRUE(e[1].is_prefill);
  EXPECT_EQ(e[1].num_tokens, 10);
}

TEST(SchedulerTest, ChunkedPrefillSplitsALongPromptIntoChunksInOrder) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 2;
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 4;
  SchedulerDriver d(o);
  d.Submit("a", 10, 2);
  std::vector<std::pair<int, int>> chunks;
  for (int i = 0; i < 3; ++i) {
    Microbatch m = d.MustNext();
    EXPECT_FALSE(d.scheduler->Next().has_value()) << "the next chunk waits for this one";
    const MicrobatchEntry& e = m.entries_by_group[0].at(0);
    EXPECT_TRUE(e.is_prefill);
    EXPECT_EQ(e.is_last_chunk, i == 2);
    chunks.emplace_back(e.start_position, e.num_tokens);
    auto events = d.Complete(m);
    EXPECT_EQ(events.size(), i == 2 ? 1u : 0u) << "only the last chunk samples";
  }
  EXPECT_THAT(chunks, ElementsAre(std::make_pair(0, 4), std::make_pair(4, 4),
                                  std::make_pair(8, 2)));
}

TEST(SchedulerTest, SpreadsSequencesOverDpGroupsLeastLoadedFirst) {
  SchedulerOptions o = SmallOptions();
  o.dp_groups = 3;
  SchedulerDriver d(o);
  for (const char* id : {"a", "b", "c", "d"}) d.Submit(id, 4, 2);
  Microbatch m = d.MustNext();
  EXPECT_THAT(IdsOf(m), ElementsAre("a", "d", "b", "c"));
  EXPECT_EQ(d.scheduler->SequencesOnGroup(0), 2);
  EXPECT_EQ(d.scheduler->SequencesOnGroup(1), 1);
  EXPECT_EQ(m.entries_by_group[1][0].dp_group, 1);
}

TEST(SchedulerTest, FewerSequencesThanDpGroupsWorks) {
  SchedulerOptions o = SmallOptions();
  o.dp_groups = 4;
  SchedulerDriver d(o);
  d.Submit("a", 4, 3);
  Microbatch m = d.MustNext();
  ASSERT_EQ(m.entries_by_group.size(), 4u);
  EXPECT_EQ(m.entries_by_group[0].size(), 1u);
  for (int g = 1; g < 4; ++g) EXPECT_TRUE(m.entries_by_group[g].empty());
  d.Complete(m);
  d.Drain();
  EXPECT_EQ(d.TokensOf("a").size(), 3u);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(d.scheduler->FreeBlocks(g), 64);
}

TEST(SchedulerTest, DecodeWaitsForABlockAndADeadlockedGroupPreemptsItsYoungest) {
  SchedulerOptions o = SmallOptions();
  o.kv_blocks_per_dp_group = 2;
  o.block_size = 2;
  SchedulerDriver d(o);
  d.Submit("a", 1, 3);  // each reserves 1 block; the third position needs a second
  d.Submit("b", 1, 3);
  d.Complete(d.MustNext());  // prefills
  d.Complete(d.MustNext());  // first decode steps fill the first blocks
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 0);
  Microbatch m = d.MustNext();  // both wait for a block: b gives its block to a
  EXPECT_EQ(d.scheduler->PreemptionCount(), 1u);
  EXPECT_THAT(IdsOf(m), ElementsAre("a"));
  EXPECT_EQ(d.scheduler->QueueDepth(), 1);
  d.Complete(m);  // a finishes with its third token
  Microbatch recompute = d.MustNext();
  ASSERT_THAT(IdsOf(recompute), ElementsAre("b"));
  const MicrobatchEntry& e = recompute.entries_by_group[0][0];
  EXPECT_TRUE(e.is_prefill);
  EXPECT_EQ(e.start_position, 0);
  EXPECT_EQ(e.num_tokens, 3) << "prompt + the two tokens b generated";
  d.Complete(recompute);
  EXPECT_EQ(d.TokensOf("a").size(), 3u);
  EXPECT_EQ(d.TokensOf("b").size(), 3u) << "no token repeated after the recompute";
  EXPECT_EQ(d.TerminalOf("b").size(), 1u);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 2);
}

TEST(SchedulerTest, CreateRefusesOptionsThatMakeNoSense) {
  SchedulerOptions o = SmallOptions();
  o.pipeline_stages = 0;
  auto s = Scheduler::Create(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("pipeline_stages = 0"));
  o = SmallOptions();
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 0;
  EXPECT_THAT(Scheduler::Create(o).status().message(), HasSubstr("prefill_chunk_tokens = 0"));
}

}  // namespace
}  // namespace seam::coordinator

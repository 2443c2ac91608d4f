// The scheduler with prefix caching: hits, references, publication, LRU
// eviction under KV pressure, salts, DP placement and the epoch change.
// StageBlocks (prefix_run.h) plays the stages' side of the block map and
// checks each position's token.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "prefix_run.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {
namespace {

using testing::kBlock;
using testing::Options;
using testing::PrefixRun;
using testing::Prompt;

TEST(SchedulerPrefix, ALaterRequestMapsTheCachedPrefixAndPrefillsOnlyTheRest) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(12, 2, 0), 2);
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 3);  // 12 tokens: 3 full blocks (a's 14th is partial)
  run.Submit("b", Prompt(12, 3, 1), 2);
  ASSERT_TRUE(run.Step());
  const MicrobatchEntry& first = run.last.entries_by_group[0][0];
  EXPECT_EQ(first.start_position, 12);
  EXPECT_EQ(first.num_tokens, 3);
  EXPECT_EQ(first.shared_blocks.size(), 3u);
  run.Drain();
  const PrefixCacheStats stats = run.driver.scheduler->PrefixStats();
  EXPECT_EQ(stats.queries, 2u);
  EXPECT_EQ(stats.query_tokens, 29u);
  EXPECT_EQ(stats.hit_tokens, 12u);
  EXPECT_EQ(run.stages.shared_tokens, 12u);
}

TEST(SchedulerPrefix, GeneratedBlocksAreCachedForTheNextTurn) {
  PrefixRun run(Options(64));
  run.Submit("turn1", Prompt(8, 0, 0), 9);  // KV of positions 0..15 once done: 4 full blocks
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 4);
  std::vector<int32_t> next(run.tokens["turn1"].begin(), run.tokens["turn1"].begin() + 16);
  next.push_back(3);  // the history, then the user's next turn
  run.Submit("turn2", next, 2);
  ASSERT_TRUE(run.Step());
  const MicrobatchEntry& first = run.last.entries_by_group[0][0];
  EXPECT_EQ(first.start_position, 16);
  EXPECT_EQ(first.shared_blocks.size(), 4u);
  run.Drain();
}

TEST(SchedulerPrefix, AWholePromptCachedStillComputesItsLastToken) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(8, 0, 0), 1);
  run.Drain();
  run.Submit("b", Prompt(8, 0, 0), 1);
  ASSERT_TRUE(run.Step());
  const MicrobatchEntry& first = run.last.entries_by_group[0][0];
  EXPECT_EQ(first.start_position, 4);  // one block shared, the second computed for its logits
  EXPECT_EQ(first.num_tokens, 4);
  run.Drain();
}

TEST(SchedulerPrefix, RequestsOfDifferentSaltsOrWithoutCacheTokensShareNothing) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(12, 1, 0), 1, "tenant-a");
  run.Drain();
  run.Submit("b", Prompt(12, 1, 1), 1, "tenant-b");
  ASSERT_TRUE(run.Step());
  EXPECT_TRUE(run.last.entries_by_group[0][0].shared_blocks.empty());
  run.Drain();
  Request r;
  r.id = "c";
  r.prompt_tokens = 13;
  r.max_new_tokens = 1;  // no cache_tokens: opted out
  ASSERT_TRUE(run.driver.scheduler->Submit(r).ok());
  run.tokens["c"] = Prompt(12, 1, 2);
  ASSERT_TRUE(run.Step());
  EXPECT_TRUE(run.last.entries_by_group[0][0].shared_blocks.empty());
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 6);  // a's 3 and b's 3; c cached none
}

TEST(SchedulerPrefix, CachedBlocksAreReleasedNotFreedWhenASequenceEnds) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(8, 1, 0), 1);
  run.Drain();
  // a's two prompt blocks stay cached; its partial block and decode block are free.
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 2);
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0), 62);
}

TEST(SchedulerPrefix, UnreferencedBlocksAreEvictedBeforeAnyoneWaits) {
  PrefixRun run(Options(8));
  run.Submit("a", Prompt(16, 0, 0), 1);  // 4 cached blocks, then unreferenced
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 4);
  run.Submit("b", Prompt(0, 24, 1), 2);  // 7 blocks of 8: 3 cached ones must go
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->PrefixStats().evictions, 3u);
  EXPECT_EQ(run.driver.scheduler->PreemptionCount(), 0u);
  EXPECT_EQ(run.tokens["b"].size(), 26u);
}

TEST(SchedulerPrefix, EvictionUnderPressureNeverTouchesARunningSequence) {
  // Many requests of two shared prefixes and long outputs on a small group:
  // blocks are cached, shared, evicted and preempted all the time, and
  // StageBlocks checks every position of every step.
  SchedulerOptions o = Options(24);
  o.max_tokens_per_microbatch = 24;
  PrefixRun run(o);
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt = Prompt(i % 2 ? 9 : 13, 1 + i % 5, i);
    if (i % 2) prompt[0] = 77;  // the second prefix differs from its first token
    run.Submit("r" + std::to_string(i), prompt, 6 + i % 7);
  }
  run.Drain();
  if (HasFailure()) return;
  const PrefixCacheStats stats = run.driver.scheduler->PrefixStats();
  EXPECT_GT(stats.hit_tokens, 0u);
  EXPECT_GT(stats.evictions, 0u);
  for (int i = 0; i < 24; ++i) {
    const std::string id = "r" + std::to_string(i);
    ASSERT_EQ(run.driver.TerminalOf(id).size(), 1u) << id;
    EXPECT_EQ(run.driver.TerminalOf(id)[0].kind, SchedulerEvent::Kind::kFinished) << id;
  }
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0) + run.driver.scheduler->CachedBlocks(0), 24);
}

TEST(SchedulerPrefix, APrefixGoesToTheDpGroupThatHoldsIt) {
  PrefixRun run(Options(64, 2));
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  const int home = run.placed["a"];
  run.Submit("x", Prompt(0, 13, 9), 1);  // no shared prefix: the emptier group
  run.Submit("b", Prompt(12, 2, 1), 1);
  ASSERT_TRUE(run.Step());
  EXPECT_EQ(run.placed["b"], home);
  EXPECT_EQ(run.placed["x"], 1 - home);
  run.Drain();
}

TEST(SchedulerPrefix, FailAllDropsTheWholeCache) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  run.Submit("b", Prompt(12, 1, 1), 1);
  ASSERT_TRUE(run.driver.scheduler->FailAll(absl::UnavailableError("stage 1 died")).ok());
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 0);
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0), 64);
  run.Submit("c", Prompt(12, 1, 2), 1);
  std::optional<Microbatch> mb = run.driver.scheduler->Next();
  ASSERT_TRUE(mb.has_value());
  EXPECT_TRUE(mb->entries_by_group[0][0].shared_blocks.empty());
  EXPECT_TRUE(mb->evicted.empty());
}

TEST(SchedulerPrefix, OffMeansNoLookupAndNoPublication) {
  SchedulerOptions o = Options(64);
  o.prefix_caching = false;
  PrefixRun run(o);
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  run.Submit("b", Prompt(12, 1, 1), 1);
  ASSERT_TRUE(run.Step());
  EXPECT_TRUE(run.last.entries_by_group[0][0].shared_blocks.empty());
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 0);
  EXPECT_EQ(run.driver.scheduler->PrefixStats().queries, 0u);
}

}  // namespace
}  // namespace seam::coordinator

// The scheduler with prefix caching when requests that share a prefix
// arrive together: the first computes it, the others wait for its blocks in
// flight and map them once published (chunk by chunk); the n samples of one
// prompt; a leader cancelled or failed while others wait; DP placement that
// trades cached tokens against load; a burst under KV pressure. StageBlocks
// (prefix_run.h) checks every position every step reads; the prefill tokens
// scheduled show what was computed.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "prefix_run.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {
namespace {

using testing::IdsOf;
using testing::kBlock;
using testing::Options;
using testing::PrefixRun;
using testing::Prompt;

std::string Id(int i) { return "r" + std::to_string(i); }

// Chunked prefill (chunks of 8 tokens) or whole prompts in one step.
class SchedulerPrefixBurst : public ::testing::TestWithParam<bool> {
 protected:
  SchedulerOptions Chunked(SchedulerOptions o) const {
    o.chunked_prefill = GetParam();
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(Prefill, SchedulerPrefixBurst, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Chunked" : "Whole";
                         });

void ExpectAllFinished(const PrefixRun& run, int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(run.driver.TerminalOf(Id(i)).size(), 1u) << Id(i);
    EXPECT_EQ(run.driver.TerminalOf(Id(i))[0].kind, SchedulerEvent::Kind::kFinished) << Id(i);
  }
}

TEST_P(SchedulerPrefixBurst, ABurstComputesItsSharedPrefixOnce) {
  // 8 prompts of 16 shared tokens (4 blocks) + 2 of their own, at once.
  PrefixRun run(Chunked(Options(64)));
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) run.Submit(Id(i), Prompt(16, 2, i), 3);
  ASSERT_TRUE(run.Step());
  EXPECT_EQ(IdsOf(run.last), std::vector<std::string>{"r0"});  // the others wait for its blocks
  run.Drain();
  if (HasFailure()) return;
  ExpectAllFinished(run, kRequests);
  EXPECT_EQ(run.prefilled["r0"], 18);
  for (int i = 1; i < kRequests; ++i) EXPECT_EQ(run.prefilled[Id(i)], 2) << Id(i);
  EXPECT_EQ(run.prefill_tokens, 18 + (kRequests - 1) * 2);  // caching off (or not waiting): 8 x 18
  const PrefixCacheStats stats = run.driver.scheduler->PrefixStats();
  EXPECT_EQ(stats.hit_tokens, (kRequests - 1) * 16u);
  EXPECT_EQ(stats.waited_requests, kRequests - 1u);
  EXPECT_EQ(run.stages.shared_tokens, (kRequests - 1) * 16u);
}

TEST_P(SchedulerPrefixBurst, TheSamplesOfOnePromptComputeItOnceAndSampleApart) {
  // n = 4 samples of a 14-token prompt (3 full blocks + 2): the first
  // computes it, the others only the partial block; each samples its own
  // tokens (here a function of the sample), which StageBlocks checks in
  // each sequence's own blocks.
  PrefixRun run(Chunked(Options(64)));
  run.driver.sampler = [](const MicrobatchEntry& e) {
    return 1000 + 100 * (e.request_id.back() - '0') + e.start_position + e.num_tokens;
  };
  for (int i = 0; i < 4; ++i) run.Submit(Id(i), Prompt(14, 0, 0), 6);
  run.Drain();
  if (HasFailure()) return;
  ExpectAllFinished(run, 4);
  EXPECT_EQ(run.prefill_tokens, 14 + 3 * 2);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(run.driver.TokensOf(Id(i)).size(), 6u);
    EXPECT_EQ(run.driver.TokensOf(Id(i))[0], 1000 + 100 * i + 14) << Id(i);
  }
  // A prompt of whole blocks still computes its last block (for its logits).
  PrefixRun whole(Chunked(Options(64)));
  for (int i = 0; i < 3; ++i) whole.Submit(Id(i), Prompt(12, 0, 0), 2);
  whole.Drain();
  EXPECT_EQ(whole.prefill_tokens, 12 + 2 * 4);
}

TEST_P(SchedulerPrefixBurst, RequestsWithNothingToGainAreNeverHeld) {
  PrefixRun run(Chunked(Options(64)));
  run.Submit("leader", Prompt(16, 2, 0), 2);
  run.Submit("follower", Prompt(16, 2, 1), 2);
  run.Submit("other", Prompt(0, 6, 2), 2);      // shares nothing: passes the held follower
  run.Submit("short", Prompt(3, 0, 3), 2);      // shares 3 tokens, no full block
  run.Submit("salted", Prompt(16, 2, 4), 2, "tenant-b");  // another tenant's prefix
  ASSERT_TRUE(run.Step());
  EXPECT_EQ(IdsOf(run.last), (std::vector<std::string>{"leader", "other", "short", "salted"}));
  EXPECT_EQ(run.driver.scheduler->QueueDepth(), 1);
  run.Drain();
  EXPECT_EQ(run.prefilled["follower"], 2);
  EXPECT_EQ(run.driver.scheduler->PrefixStats().waited_requests, 1u);
}

TEST(SchedulerPrefixBurstChunks, AFollowerStartsOnceTheBlocksItSharesArePublished) {
  // The leader's 26-token prompt takes 4 chunks of 8; the follower shares
  // its first 8 tokens only, so it starts after the leader's first chunk.
  PrefixRun run(Options(64));
  run.Submit("leader", Prompt(24, 2, 0), 2);
  run.Submit("follower", Prompt(8, 10, 1), 2);
  ASSERT_TRUE(run.Step());
  EXPECT_EQ(IdsOf(run.last), std::vector<std::string>{"leader"});
  ASSERT_TRUE(run.Step());
  ASSERT_EQ(IdsOf(run.last), (std::vector<std::string>{"leader", "follower"}));
  const MicrobatchEntry& start = run.last.entries_by_group[0][1];
  EXPECT_EQ(start.start_position, 8);
  EXPECT_EQ(start.shared_blocks.size(), 2u);
  run.Drain();
  EXPECT_EQ(run.prefilled["follower"], 10);
}

TEST(SchedulerPrefixBurstChunks, FollowersOfALeaderCancelledInFlightFollowTheNextOne) {
  PrefixRun run(Options(64));
  for (int i = 0; i < 3; ++i) run.Submit(Id(i), Prompt(16, 2, i), 2);
  std::optional<Microbatch> first = run.driver.scheduler->Next();
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(IdsOf(*first), std::vector<std::string>{"r0"});
  run.Run(*first);
  run.Cancel("r0");  // in flight: ends when its chunk comes back, publishing nothing
  run.Finish(*first);
  ASSERT_EQ(run.driver.TerminalOf("r0").size(), 1u);
  EXPECT_EQ(run.driver.TerminalOf("r0")[0].reason, FinishReason::kCancelled);
  run.Drain();
  // r1 computes the prefix again; r2 waits for r1's blocks instead.
  EXPECT_EQ(run.prefilled["r1"], 18);
  EXPECT_EQ(run.prefilled["r2"], 2);
  EXPECT_EQ(run.driver.scheduler->PrefixStats().waited_requests, 2u);
}

TEST(SchedulerPrefixBurstChunks, FollowersOfALeaderCancelledBetweenChunksMapWhatItPublished) {
  PrefixRun run(Options(64));
  for (int i = 0; i < 3; ++i) run.Submit(Id(i), Prompt(16, 2, i), 2);
  ASSERT_TRUE(run.Step());  // r0's first chunk: 2 blocks published
  run.Cancel("r0");         // not in flight: ends now; its blocks stay cached
  EXPECT_EQ(run.driver.scheduler->EvictableBlocks(0), 2);
  run.Drain();
  EXPECT_EQ(run.prefilled["r1"], 10);  // maps r0's 2 blocks, computes the rest
  EXPECT_EQ(run.prefilled["r2"], 2);   // follows r1
}

TEST(SchedulerPrefixBurstChunks, FollowersOfAFailedLeaderComputeThePrefixOnce) {
  PrefixRun run(Options(64));
  for (int i = 0; i < 3; ++i) run.Submit(Id(i), Prompt(16, 2, i), 2);
  std::optional<Microbatch> first = run.driver.scheduler->Next();
  ASSERT_TRUE(first.has_value());
  auto failed = run.driver.scheduler->Fail(first->id, absl::UnavailableError("stage 1 lost r0"));
  ASSERT_TRUE(failed.ok());
  ASSERT_EQ(failed->size(), 1u);
  EXPECT_EQ((*failed)[0].kind, SchedulerEvent::Kind::kFailed);
  run.Drain();
  EXPECT_EQ(run.prefilled["r1"], 18);
  EXPECT_EQ(run.prefilled["r2"], 2);
}

TEST(SchedulerPrefixBurstChunks, ABurstOnTwoDpGroupsComputesThePrefixOncePerGroup) {
  // The second request would wait behind the first's whole prefill on its
  // group: the idle group computes it sooner. The rest wait for either.
  PrefixRun run(Options(64, 2));
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) run.Submit(Id(i), Prompt(16, 2, i), 3);
  run.Drain();
  if (HasFailure()) return;
  ExpectAllFinished(run, kRequests);
  EXPECT_NE(run.placed["r0"], run.placed["r1"]);
  EXPECT_EQ(run.prefill_tokens, 2 * 18 + (kRequests - 2) * 2);
  int on_zero = 0;
  for (int i = 0; i < kRequests; ++i) on_zero += run.placed[Id(i)] == 0 ? 1 : 0;
  EXPECT_EQ(on_zero, kRequests / 2);  // equal loads: the usual order alternates
}

TEST(SchedulerPrefixBurstChunks, AMuchBusierGroupDoesNotWinForItsPrefix) {
  PrefixRun run(Options(64, 2));
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  const int home = run.placed["a"];
  run.Submit("busy", Prompt(12, 40, 1), 1);  // maps a's 3 blocks on home, then 40 tokens to prefill
  ASSERT_TRUE(run.Step());
  ASSERT_EQ(run.placed["busy"], home);
  // home saves 12 tokens but has 32 left to prefill; the other group is idle.
  run.Submit("b", Prompt(12, 2, 2), 1);
  ASSERT_TRUE(run.Step());
  EXPECT_EQ(run.placed["b"], 1 - home);
  EXPECT_TRUE(run.last.entries_by_group[1 - home][0].shared_blocks.empty());
  run.Drain();
}

TEST_P(SchedulerPrefixBurst, ABurstUnderKvPressureEndsWithEveryTokenRight) {
  // Bursts of two prefixes and long outputs on a small group: followers
  // wait, leaders publish, cached blocks are evicted and decoding
  // sequences preempted (and recomputed, leading others) throughout.
  SchedulerOptions o = Chunked(Options(16));
  o.max_tokens_per_microbatch = 24;
  PrefixRun run(o);
  constexpr int kRequests = 16;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int32_t> prompt = Prompt(i % 2 ? 9 : 13, 1 + i % 4, i);
    if (i % 2) prompt[0] = 77;
    run.Submit(Id(i), prompt, 10 + i % 7);
  }
  run.Drain();
  if (HasFailure()) return;
  ExpectAllFinished(run, kRequests);
  const PrefixCacheStats stats = run.driver.scheduler->PrefixStats();
  EXPECT_GT(stats.waited_requests, 0u);
  EXPECT_GT(stats.hit_tokens, 0u);
  EXPECT_GT(run.driver.scheduler->PreemptionCount(), 0u);
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0) + run.driver.scheduler->CachedBlocks(0), 16);
}

}  // namespace
}  // namespace seam::coordinator

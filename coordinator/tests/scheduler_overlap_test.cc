// SchedulerOptions::overlap_steps: with one pipeline stage the next
// microbatch is built while one runs, its decode rows fed on the stage the
// token the running step chooses; prompts take their next chunk; nothing
// past max_new_tokens; a request that ends with the running step's token has
// the next step's dropped; waves do not overlap; tokens equal those of the
// same load without overlap.
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler_driver.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {
namespace {

using testing::IdsOf;
using testing::SchedulerDriver;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// With chunks of 4 prompt tokens, and overlap.
SchedulerOptions Overlapped() {
  SchedulerOptions o = testing::SmallOptions();
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 4;
  o.overlap_steps = true;
  return o;
}

// The same, with decode runs of up to 4 steps from the first token on.
SchedulerOptions OverlappedWithRuns() {
  SchedulerOptions o = Overlapped();
  o.max_decode_steps = 4;
  o.first_decode_steps = 4;
  return o;
}

const MicrobatchEntry& EntryOf(const Microbatch& mb, const std::string& id) {
  for (const auto& e : mb.entries_by_group[0]) {
    if (e.request_id == id) return e;
  }
  static const MicrobatchEntry none;
  ADD_FAILURE() << id << " is not in microbatch " << mb.id;
  return none;
}

TEST(SchedulerOverlapTest, TheNextStepIsBuiltWhileOneRunsAndFedOnTheStage) {
  SchedulerDriver d(Overlapped());
  d.Submit("a", 4, 3);
  d.Submit("b", 8, 3);
  const Microbatch first = d.MustNext();
  EXPECT_THAT(IdsOf(first), ElementsAre("a", "b"));
  const Microbatch second = d.MustNext();
  EXPECT_EQ(d.scheduler->InFlightCount(), 2);
  EXPECT_FALSE(d.scheduler->Next().has_value()) << "one step in flight and one built ahead";
  // a's prompt ends in the first: its first decode step follows, fed on the stage.
  const MicrobatchEntry& a = EntryOf(second, "a");
  EXPECT_FALSE(a.is_prefill);
  EXPECT_TRUE(a.feeds_previous);
  EXPECT_EQ(a.input_token, -1);
  EXPECT_EQ(a.start_position, 4);
  // b's prompt takes its next chunk.
  const MicrobatchEntry& b = EntryOf(second, "b");
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(b.start_position, 4);
  EXPECT_TRUE(b.is_last_chunk);
  d.Complete(first);
  const Microbatch third = d.MustNext();
  EXPECT_EQ(EntryOf(third, "a").start_position, 5);
  EXPECT_TRUE(EntryOf(third, "a").feeds_previous);
  EXPECT_EQ(EntryOf(third, "b").start_position, 8);
  EXPECT_TRUE(EntryOf(third, "b").feeds_previous);
  d.Complete(second);
  // a has made 2 tokens and one more is in flight: its 3 are all scheduled.
  const Microbatch fourth = d.MustNext();
  EXPECT_THAT(IdsOf(fourth), ElementsAre("b"));
  d.Complete(third);
  d.Complete(fourth);
  d.Drain();
  EXPECT_EQ(d.TokensOf("a").size(), 3u);
  EXPECT_EQ(d.TokensOf("b").size(), 3u);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64) << "every block comes back";
}

TEST(SchedulerOverlapTest, ARequestEndingWithTheRunningStepsTokenDropsTheNextStepsToken) {
  SchedulerDriver d(Overlapped());
  d.sampler = [](const MicrobatchEntry& e) { return e.request_id == "a" ? 9 : 5; };
  d.Submit("a", 4, 8, {9});  // ends with its first token
  d.Submit("b", 4, 2);
  const Microbatch first = d.MustNext();
  const Microbatch second = d.MustNext();
  EXPECT_TRUE(EntryOf(second, "a").feeds_previous);
  d.Complete(first);
  ASSERT_EQ(d.TerminalOf("a").size(), 1u);
  EXPECT_EQ(d.TerminalOf("a")[0].reason, FinishReason::kStopToken);
  // The stages ran a's fed step anyway; its result is dropped, with or without one.
  d.Complete(second);
  d.Drain();
  EXPECT_THAT(d.TokensOf("a"), ElementsAre(9));
  EXPECT_THAT(d.TokensOf("b"), ElementsAre(5, 5));
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

TEST(SchedulerOverlapTest, ARequestCancelledWhileTwoStepsRunEndsOnceAndTheOtherStepSkipsIt) {
  SchedulerDriver d(Overlapped());
  d.Submit("a", 4, 8);
  const Microbatch first = d.MustNext();
  const Microbatch second = d.MustNext();
  auto cancelled = d.scheduler->Cancel("a");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_TRUE(cancelled->empty()) << "in flight: it ends when a step holding it ends";
  d.Complete(first);
  ASSERT_EQ(d.TerminalOf("a").size(), 1u);
  EXPECT_EQ(d.TerminalOf("a")[0].reason, FinishReason::kCancelled);
  d.Complete(second);
  EXPECT_EQ(d.TerminalOf("a").size(), 1u);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

TEST(SchedulerOverlapTest, AFailedStepFailsItsRequestsAndTheStepBuiltAfterItSkipsThem) {
  SchedulerDriver d(Overlapped());
  d.Submit("a", 4, 8);
  const Microbatch first = d.MustNext();
  const Microbatch second = d.MustNext();
  auto failed = d.scheduler->Fail(first.id, absl::InternalError("stage 0 failed"));
  ASSERT_TRUE(failed.ok()) << failed.status();
  ASSERT_EQ(failed->size(), 1u);
  EXPECT_EQ((*failed)[0].kind, SchedulerEvent::Kind::kFailed);
  // The stage answers the fed step of a request that already failed with an error; the driver passes none.
  auto events = d.scheduler->Complete(second.id, {});
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(events->empty());
  EXPECT_EQ(d.scheduler->RunningCount(), 0);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

TEST(SchedulerOverlapTest, MultiStepRunsDoNotOverlap) {
  SchedulerDriver d(OverlappedWithRuns());
  d.Submit("a", 4, 16);
  d.Complete(d.MustNext());
  const Microbatch run = d.MustNext();
  ASSERT_GT(run.decode_steps, 1);
  EXPECT_FALSE(d.scheduler->Next().has_value()) << "a wave's sequences come back together";
}

// With runs of several steps allowed and every sequence in a single step in
// flight: when one of them will have a single token left, the run they would
// form is one step, so the next is built while this one runs (the tail of a
// load overlaps); when all have more, the scheduler waits for the run.
TEST(SchedulerOverlapTest, SingleStepsOverlapWhenTheRunAfterThemWouldBeOneStep) {
  SchedulerDriver d(OverlappedWithRuns());
  d.Submit("a", 4, 12);
  d.Submit("b", 4, 3);
  const Microbatch first = d.MustNext();
  const Microbatch second = d.MustNext();  // both prompts' first decode steps, fed
  EXPECT_EQ(second.decode_steps, 1);
  d.Complete(first);
  const std::optional<Microbatch> third = d.scheduler->Next();
  ASSERT_TRUE(third.has_value()) << "b will have one token left: no run to wait for";
  EXPECT_THAT(IdsOf(*third), ElementsAre("a", "b"));
  EXPECT_TRUE(EntryOf(*third, "a").feeds_previous);
  EXPECT_TRUE(EntryOf(*third, "b").feeds_previous);
  EXPECT_EQ(third->decode_steps, 1);
  d.Complete(second);
  d.Complete(*third);
  d.Drain();
  EXPECT_EQ(d.TokensOf("a").size(), 12u);
  EXPECT_EQ(d.TokensOf("b").size(), 3u);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

TEST(SchedulerOverlapTest, EverySequenceInFlightWithTokensLeftWaitsForTheRun) {
  SchedulerDriver d(OverlappedWithRuns());
  d.Submit("a", 4, 12);
  d.Submit("b", 4, 12);
  const Microbatch first = d.MustNext();
  const Microbatch second = d.MustNext();
  d.Complete(first);
  EXPECT_FALSE(d.scheduler->Next().has_value()) << "both will have 10 tokens left: a run of 4 follows";
  d.Complete(second);
  const Microbatch run = d.MustNext();
  EXPECT_EQ(run.decode_steps, 4);
  EXPECT_THAT(IdsOf(run), ElementsAre("a", "b"));
}

// Tokens depend on the request and the position only: the same load with and
// without overlap gives every request the same tokens and ends.
TEST(SchedulerOverlapTest, TokensEqualTheSameLoadWithoutOverlap) {
  const auto run = [](bool overlap, int steps) {
    SchedulerOptions o = Overlapped();
    o.overlap_steps = overlap;
    o.max_decode_steps = steps;
    o.first_decode_steps = steps;
    o.max_sequences_per_microbatch = 5;
    o.max_tokens_per_microbatch = 12;
    SchedulerDriver d(o);
    d.sampler = [](const MicrobatchEntry& e) {
      const int32_t t = static_cast<int32_t>((std::hash<std::string>{}(e.request_id) + 31 * e.start_position) % 40);
      return t;
    };
    for (int i = 0; i < 12; ++i) d.Submit("r" + std::to_string(i), 1 + (i * 7) % 11, 1 + (i * 5) % 9, {13});
    d.Drain();
    std::vector<std::vector<int32_t>> tokens;
    for (int i = 0; i < 12; ++i) tokens.push_back(d.TokensOf("r" + std::to_string(i)));
    EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
    return tokens;
  };
  EXPECT_EQ(run(true, 1), run(false, 1));
  EXPECT_EQ(run(true, 4), run(false, 1)) << "runs of up to 4 steps";
}

TEST(SchedulerOverlapTest, CreateRefusesOverlapWithSeveralStages) {
  SchedulerOptions o = Overlapped();
  o.pipeline_stages = 2;
  auto created = Scheduler::Create(o);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(), HasSubstr("overlap_steps"));
}

}  // namespace
}  // namespace seam::coordinator

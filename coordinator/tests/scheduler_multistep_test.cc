// Multi-step decode in the scheduler: how many steps a microbatch runs, how
// its tokens end requests, and how microbatches of a pipeline form waves.
#include <set>

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

SchedulerOptions MultiStep(int stages = 1, int steps = 8) {
  SchedulerOptions o;
  o.pipeline_stages = stages;
  o.kv_blocks_per_dp_group = 64;
  o.block_size = 4;
  o.max_tokens_per_microbatch = 64;
  o.max_sequences_per_microbatch = 8;
  o.max_decode_steps = steps;
  return o;
}

TEST(SchedulerMultiStep, DecodeRunsSeveralStepsAndEndsOnMaxTokensExactly) {
  SchedulerDriver d(MultiStep());
  d.sampler = [](const MicrobatchEntry& e) { return 100 + e.start_position; };
  d.Submit("a", 4, 20);
  d.Complete(d.MustNext());  // prefill: the first token
  // Runs start short and double: no more steps than tokens made so far.
  std::vector<int> steps;
  while (std::optional<Microbatch> run = d.scheduler->Next()) {
    steps.push_back(run->decode_steps);
    d.Complete(*run);
  }
  EXPECT_THAT(steps, ElementsAre(1, 2, 4, 8, 4)) << "the last: as many steps as tokens are left";
  // The prefill entry starts at 0; step k of a run feeds position start + k.
  std::vector<int32_t> expected = {100};
  for (int p = 4; p < 23; ++p) expected.push_back(100 + p);
  EXPECT_EQ(d.TokensOf("a"), expected);
  ASSERT_EQ(d.TerminalOf("a").size(), 1u);
  EXPECT_EQ(d.TerminalOf("a")[0].reason, FinishReason::kMaxTokens);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

TEST(SchedulerMultiStep, RunsStartAtFirstDecodeSteps) {
  SchedulerOptions o = MultiStep();
  o.first_decode_steps = 8;
  SchedulerDriver d(o);
  d.sampler = [](const MicrobatchEntry& e) { return 100 + e.start_position; };
  d.Submit("a", 4, 20);
  d.Submit("b", 4, 20);
  Microbatch prefill = d.MustNext();
  EXPECT_EQ(prefill.num_sequences, 2) << "both prompts in one microbatch";
  d.Complete(prefill);
  std::vector<int> steps;
  while (std::optional<Microbatch> run = d.scheduler->Next()) {
    EXPECT_EQ(run->num_sequences, 2);
    if (steps.empty()) {
      // Positions 4..11 and the one after them, where a stage may run ahead:
      // 13 positions, 4 blocks of 4 each.
      EXPECT_EQ(d.scheduler->FreeBlocks(0), 64 - 2 * 4);
    }
    steps.push_back(run->decode_steps);
    d.Complete(*run);
  }
  EXPECT_THAT(steps, ElementsAre(8, 8, 3)) << "no ramp; the last as many steps as tokens are left";
  std::vector<int32_t> expected = {100};
  for (int p = 4; p < 23; ++p) expected.push_back(100 + p);
  EXPECT_EQ(d.TokensOf("a"), expected);
  EXPECT_EQ(d.TokensOf("b"), expected);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

// Two sequences with 19 and 2 tokens left after their prefill.
SchedulerDriver TwoLengths(int max_context) {
  SchedulerOptions o = MultiStep();
  o.first_decode_steps = 8;
  o.max_context = max_context;
  SchedulerDriver d(o);
  d.sampler = [](const MicrobatchEntry& e) { return 100 + e.start_position; };
  d.Submit("a", 4, 20);
  d.Submit("b", 4, 3);
  d.Complete(d.MustNext());  // both prefill: one token each
  return d;
}

TEST(SchedulerMultiStep, WithTheContextKnownARunTakesTheMostTokensLeftAndTheShorterRunPastTheirLast) {
  SchedulerDriver d = TwoLengths(/*max_context=*/64);
  Microbatch run = d.MustNext();
  EXPECT_EQ(run.decode_steps, 8) << "b has 2 tokens left and runs past them";
  EXPECT_EQ(run.num_sequences, 2);
  d.Complete(run);
  // b ends at its third token; the tokens of its later steps are dropped.
  EXPECT_THAT(d.TokensOf("b"), ElementsAre(100, 104, 105));
  ASSERT_EQ(d.TerminalOf("b").size(), 1u);
  EXPECT_EQ(d.TerminalOf("b")[0].reason, FinishReason::kMaxTokens);
  std::vector<int> steps;
  while (std::optional<Microbatch> next = d.scheduler->Next()) {
    steps.push_back(next->decode_steps);
    d.Complete(*next);
  }
  EXPECT_THAT(steps, ElementsAre(8, 3));
  std::vector<int32_t> expected = {100};
  for (int p = 4; p < 23; ++p) expected.push_back(100 + p);
  EXPECT_EQ(d.TokensOf("a"), expected);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
}

TEST(SchedulerMultiStep, WithoutTheContextOrPastItARunTakesTheFewestTokensLeft) {
  SchedulerDriver unknown = TwoLengths(/*max_context=*/0);
  EXPECT_EQ(unknown.MustNext().decode_steps, 2);
  // Positions 4..11 and the one ahead: 13 > 12.
  SchedulerDriver short_context = TwoLengths(/*max_context=*/12);
  EXPECT_EQ(short_context.MustNext().decode_steps, 2);
}

TEST(SchedulerMultiStep, AStopTokenEndsTheRequestAndDropsTheLaterSteps) {
  SchedulerDriver d(MultiStep());
  d.sampler = [](const MicrobatchEntry& e) { return e.start_position == 7 ? 2 : 50; };
  d.Submit("a", 4, 30, {2});
  d.Complete(d.MustNext());
  d.Complete(d.MustNext());  // one step: position 4
  Microbatch run = d.MustNext();
  ASSERT_EQ(run.decode_steps, 2);  // positions 5, 6
  d.Complete(run);
  run = d.MustNext();
  ASSERT_EQ(run.decode_steps, 4);  // positions 7 (the stop token), 8, 9, 10
  d.Complete(run);
  EXPECT_THAT(d.TokensOf("a"), ElementsAre(50, 50, 50, 50, 2));
  ASSERT_EQ(d.TerminalOf("a").size(), 1u);
  EXPECT_EQ(d.TerminalOf("a")[0].reason, FinishReason::kStopToken);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 64);
  EXPECT_EQ(d.scheduler->RunningCount(), 0);
}

TEST(SchedulerMultiStep, AWaitingRequestGetsSingleStepsSoItsPrefillIsNotHeldBack) {
  SchedulerDriver d(MultiStep());
  d.Submit("a", 4, 30);
  d.Complete(d.MustNext());
  d.Submit("b", 4, 30);
  Microbatch mixed = d.MustNext();
  EXPECT_EQ(mixed.decode_steps, 1);
  EXPECT_THAT(IdsOf(mixed), ElementsAre("a", "b"));
  d.Complete(mixed);
  Microbatch next = d.MustNext();
  EXPECT_EQ(next.decode_steps, 1) << "b has made one token";
  d.Complete(next);
  EXPECT_EQ(d.MustNext().decode_steps, 2) << "both decode, nothing waits";
}

TEST(SchedulerMultiStep, OneStepWhenTheKvForAllStepsIsNotFree) {
  SchedulerOptions o = MultiStep();
  o.kv_blocks_per_dp_group = 4;  // 16 positions
  SchedulerDriver d(o);
  d.Submit("a", 3, 13);  // holds 1 block after admission (3 + 1 positions)
  d.Submit("b", 11, 5);  // holds 3 blocks (11 + 1): none is left
  d.Complete(d.MustNext());
  // Four steps would need a block more for each; one step needs none.
  Microbatch next = d.MustNext();
  EXPECT_EQ(next.decode_steps, 1);
  EXPECT_EQ(next.num_sequences, 2);
}

TEST(SchedulerMultiStep, APipelinesMicrobatchesFormOneWaveAndComeBackTogether) {
  SchedulerDriver d(MultiStep(/*stages=*/2));
  for (int i = 0; i < 4; ++i) d.Submit("s" + std::to_string(i), 3, 20);
  d.Complete(d.MustNext());
  for (int k = 0; k < 3; ++k) {  // steps 1, 2 and 4: nine tokens made
    Microbatch a = d.MustNext(), b = d.MustNext();
    d.Complete(a);
    d.Complete(b);
  }
  Microbatch a = d.MustNext(), b = d.MustNext();
  EXPECT_EQ(a.decode_steps, 8);
  EXPECT_EQ(b.decode_steps, 8);
  EXPECT_EQ(a.num_sequences + b.num_sequences, 4);
  d.Complete(a);
  EXPECT_FALSE(d.scheduler->Next().has_value()) << "a's sequences wait for the rest of the wave";
  d.Complete(b);
  Microbatch c = d.MustNext(), e = d.MustNext();
  EXPECT_EQ(c.decode_steps, 4) << "sixteen of twenty tokens made";
  EXPECT_EQ(c.num_sequences + e.num_sequences, 4);
}

TEST(SchedulerMultiStep, ResultsWithTheWrongNumberOfTokensAreRefused) {
  SchedulerDriver d(MultiStep());
  d.Submit("a", 4, 30);
  d.Complete(d.MustNext());
  d.Complete(d.MustNext());
  Microbatch run = d.MustNext();
  ASSERT_EQ(run.decode_steps, 2);
  SequenceResult r;
  r.request_id = "a";
  r.tokens = {1, 2, 3};
  auto events = d.scheduler->Complete(run.id, {r});
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(events.status().message(), HasSubstr("has 3 tokens"));
  r.tokens.assign(2, -1);
  EXPECT_EQ(d.scheduler->Complete(run.id, {r}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SchedulerMultiStep, OptionIsChecked) {
  SchedulerOptions o = MultiStep();
  o.max_decode_steps = 0;
  EXPECT_EQ(Scheduler::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_decode_steps = kMaxDecodeSteps + 1;
  EXPECT_EQ(Scheduler::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = MultiStep();
  o.first_decode_steps = 0;
  EXPECT_EQ(Scheduler::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = MultiStep();
  o.max_context = -1;
  EXPECT_EQ(Scheduler::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::coordinator

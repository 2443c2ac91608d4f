// How requests end: max tokens, stop tokens, Cancel, per-sequence errors,
// Fail and FailAll; Submit and Complete refusals with their codes and sizes.
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
using Kind = SchedulerEvent::Kind;

SchedulerOptions Options(int stages = 1) {
  SchedulerOptions o;
  o.pipeline_stages = stages;
  o.kv_blocks_per_dp_group = 16;
  o.block_size = 4;
  o.max_tokens_per_microbatch = 32;
  o.max_queue = 2;
  return o;
}

Request Req(const std::string& id, int prompt, int max_new) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.max_new_tokens = max_new;
  return r;
}

TEST(SchedulerResultsTest, FinishesOnMaxNewTokens) {
  SchedulerDriver d(Options());
  d.Submit("a", 3, 3);
  d.Drain();
  EXPECT_THAT(d.TokensOf("a"), ElementsAre(7, 7, 7));
  auto ends = d.TerminalOf("a");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].kind, Kind::kFinished);
  EXPECT_EQ(ends[0].reason, FinishReason::kMaxTokens);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 16);
}

TEST(SchedulerResultsTest, FinishesOnAStopTokenAfterEmittingIt) {
  SchedulerDriver d(Options());
  int step = 0;
  d.sampler = [&](const MicrobatchEntry&) { return ++step == 2 ? 42 : 5; };
  d.Submit("a", 3, 10, {42});
  d.Drain();
  EXPECT_THAT(d.TokensOf("a"), ElementsAre(5, 42));
  auto ends = d.TerminalOf("a");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].reason, FinishReason::kStopToken);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 16);
}

TEST(SchedulerResultsTest, PromptThatCanNeverFitIsInvalidArgumentNamingTheSizes) {
  SchedulerDriver d(Options());
  absl::Status s = d.scheduler->Submit(Req("big", 60, 10));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("prompt of 60 tokens + max_new_tokens 10 = 70"));
  EXPECT_THAT(s.message(), HasSubstr("16 blocks x 4 tokens = 64 tokens"));
  EXPECT_EQ(d.scheduler->Submit(Req("empty", 0, 1)).code(), absl::StatusCode::kInvalidArgument);
  absl::Status wide = d.scheduler->Submit(Req("wide", 40, 1));
  EXPECT_EQ(wide.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wide.message(), HasSubstr("exceeds max_tokens_per_microbatch 32"));
  EXPECT_EQ(d.scheduler->QueueDepth(), 0);
}

TEST(SchedulerResultsTest, FullQueueIsResourceExhaustedAndDuplicateIsAlreadyExists) {
  SchedulerDriver d(Options());
  d.Submit("a", 2, 1);
  EXPECT_EQ(d.scheduler->Submit(Req("a", 2, 1)).code(), absl::StatusCode::kAlreadyExists);
  d.Submit("b", 2, 1);
  absl::Status full = d.scheduler->Submit(Req("c", 2, 1));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("2 of 2 waiting"));
  d.Drain();
  d.Submit("a", 2, 1);  // an id is free again once its request ended
}

TEST(SchedulerResultsTest, FailEndsExactlyItsSequencesWithTheCodeAndFreesTheirBlocks) {
  SchedulerOptions o = Options(2);
  o.max_sequences_per_microbatch = 1;
  SchedulerDriver d(o);
  d.Submit("a", 4, 4);
  d.Submit("b", 4, 4);
  Microbatch ma = d.MustNext();
  Microbatch mb = d.MustNext();
  auto events = d.scheduler->Fail(ma.id, absl::UnavailableError("stage 1 died"));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].request_id, "a");
  EXPECT_EQ((*events)[0].kind, Kind::kFailed);
  EXPECT_EQ((*events)[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 16 - 2);  // only b's reservation remains
  EXPECT_EQ(d.scheduler->Fail(ma.id, absl::UnavailableError("x")).status().code(),
            absl::StatusCode::kNotFound);
  d.Complete(mb);
  d.Drain();
  EXPECT_EQ(d.TokensOf("b").size(), 4u);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 16);
}

TEST(SchedulerResultsTest, AnErrorResultFailsOnlyThatSequence) {
  SchedulerDriver d(Options());
  d.Submit("a", 4, 2);
  d.Submit("b", 4, 2);
  Microbatch m = d.MustNext();
  SequenceResult ra{"a", 3, absl::OkStatus()};
  SequenceResult rb{"b", -1, absl::InternalError("nan in logits")};
  auto events = d.scheduler->Complete(m.id, {rb, ra});
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].kind, Kind::kToken);
  EXPECT_EQ((*events)[1].kind, Kind::kFailed);
  EXPECT_EQ((*events)[1].status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(d.scheduler->RunningCount(), 1);
}

TEST(SchedulerResultsTest, CompleteRefusesBadResultsAndChangesNothing) {
  SchedulerDriver d(Options());
  d.Submit("a", 4, 2);
  d.Submit("b", 4, 2);
  Microbatch m = d.MustNext();
  SequenceResult ra{"a", 3, absl::OkStatus()};
  auto missing = d.scheduler->Complete(m.id, {ra});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("no result for request 'b'"));
  auto stranger = d.scheduler->Complete(m.id, {ra, SequenceResult{"zz", 1, absl::OkStatus()}});
  EXPECT_THAT(stranger.status().message(), HasSubstr("'zz', which is not in it"));
  auto no_token = d.scheduler->Complete(m.id, {ra, SequenceResult{"b", -1, absl::OkStatus()}});
  EXPECT_THAT(no_token.status().message(), HasSubstr("samples in this step"));
  EXPECT_EQ(d.scheduler->InFlightCount(), 1);
  EXPECT_EQ(d.scheduler->Complete(999, {}).status().code(), absl::StatusCode::kNotFound);
  d.Complete(m);
  EXPECT_EQ(d.TokensOf("a").size(), 1u);
}

TEST(SchedulerResultsTest, CancelEndsAQueuedRequestNowAndAnInFlightOneOnItsResult) {
  SchedulerOptions o = Options();
  o.max_sequences_per_microbatch = 1;
  SchedulerDriver d(o);
  d.Submit("a", 4, 4);
  d.Submit("b", 4, 4);
  Microbatch m = d.MustNext();
  auto queued = d.scheduler->Cancel("b");
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 1u);
  EXPECT_EQ((*queued)[0].reason, FinishReason::kCancelled);
  auto in_flight = d.scheduler->Cancel("a");
  ASSERT_TRUE(in_flight.ok());
  EXPECT_TRUE(in_flight->empty());
  auto events = d.Complete(m);
  ASSERT_EQ(events.size(), 1u) << "no token for a cancelled request";
  EXPECT_EQ(events[0].kind, Kind::kFinished);
  EXPECT_EQ(events[0].reason, FinishReason::kCancelled);
  EXPECT_EQ(d.scheduler->Cancel("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 16);
}

TEST(SchedulerResultsTest, TheFirstEpochIsAnOptionAndItsMicrobatchesCountFromOne) {
  SchedulerOptions o = Options(2);
  o.first_epoch = 41;
  o.max_sequences_per_microbatch = 1;
  SchedulerDriver d(o);
  d.Submit("a", 4, 4);
  d.Submit("b", 4, 4);
  const Microbatch m1 = d.MustNext();
  const Microbatch m2 = d.MustNext();
  EXPECT_EQ(m1.epoch, 41u);
  EXPECT_EQ(m1.sequence_number, 1u);
  EXPECT_EQ(m2.sequence_number, 2u);
}

TEST(SchedulerResultsTest, FailAllEndsEveryRequestAndForgetsInFlightMicrobatches) {
  SchedulerOptions o = Options(2);
  o.max_sequences_per_microbatch = 1;
  o.max_queue = 8;
  SchedulerDriver d(o);
  for (const char* id : {"a", "b", "c"}) d.Submit(id, 4, 4);
  Microbatch m = d.MustNext();
  d.MustNext();
  auto events = d.scheduler->FailAll(absl::UnavailableError("stage 0 lost"));
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  for (const auto& e : *events) {
    EXPECT_EQ(e.kind, Kind::kFailed);
    EXPECT_EQ(e.status.code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(d.scheduler->Epoch(), 1u);
  EXPECT_EQ(d.scheduler->InFlightCount(), 0);
  EXPECT_EQ(d.scheduler->FreeBlocks(0), 16);
  EXPECT_EQ(d.scheduler->Complete(m.id, {}).status().code(), absl::StatusCode::kNotFound);
  d.Submit("a", 4, 1);
  const Microbatch first = d.MustNext();
  EXPECT_EQ(first.epoch, 1u);
  EXPECT_EQ(first.sequence_number, 1u) << "each epoch counts its microbatches from 1";
}

}  // namespace
}  // namespace seam::coordinator

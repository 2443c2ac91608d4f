// PipelineDriver's decisions against fake stage links: tokens reach the call,
// a stage error fails its microbatch, a broken or silent stage ends every
// call UNAVAILABLE, and the client's limits (queue, deadline) are honoured;
// only the last stage gets sampling, once per sequence, each sequence with
// its own seed (a fresh one per call without a client seed); a stop string
// ends a sequence with its text cut before it.
#include "pipeline_driver.h"

#include "fake_pipeline.h"

#include "absl/strings/str_cat.h"
#include "seam/core/sampling_seed.h"

#include <gmock/gmock.h>
#include <algorithm>

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <future>
#include <mutex>
#include <thread>

namespace seam::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::FakeLink;
using testing::NumberText;
using testing::Pipeline;
using testing::Recorder;

TEST(PipelineDriver, OnlyTheLastStageGetsSamplingOncePerSequence) {
  Pipeline p;
  p.sampling.set_temperature(0.5f);
  p.sampling.set_seed(77);
  Recorder r(2);
  p.Submit(r, {{10, 20}, {5}});
  ASSERT_TRUE(r.Wait().ok());
  for (const v1::SequenceEntry& e : p.EntriesOf(0)) EXPECT_FALSE(e.has_sampling()) << e.ShortDebugString();
  std::map<uint64_t, int> with_sampling;
  for (const v1::SequenceEntry& e : p.EntriesOf(1)) {
    EXPECT_EQ(e.has_sampling(), e.is_prefill() && e.position_start() == 0) << e.ShortDebugString();
    if (!e.has_sampling()) continue;
    ++with_sampling[e.sequence_id()];
    EXPECT_FLOAT_EQ(e.sampling().temperature(), 0.5f);
    EXPECT_EQ(e.sampling().prompt_tokens(), static_cast<uint32_t>(e.token_ids_size()));
    EXPECT_EQ(e.server_request_id(), "req-00000000000000c1");
  }
  ASSERT_EQ(with_sampling.size(), 2u);
  std::set<uint64_t> seeds;
  for (const v1::SequenceEntry& e : p.EntriesOf(1)) {
    if (e.has_sampling()) seeds.insert(e.sampling().seed());
  }
  EXPECT_EQ(seeds, (std::set<uint64_t>{77, SequenceSeed(77, 1)}));
}

// Prefix caching with blocks of 4: the first call publishes its prompt's two
// full blocks (and one of its generated tokens); a later call with the same first 8 tokens maps them (its
// first entry starts at 8, with its sampling); one with a repetition penalty
// computes its whole prompt.
TEST(PipelineDriver, ALaterCallMapsThePublishedBlocksOfAnEarlierOne) {
  PipelineDriverOptions o;
  o.scheduler.prefix_caching = true;
  o.scheduler.block_size = 4;
  Pipeline p(o);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  Recorder first(1), second(1);
  p.Submit(first, {prompt});
  ASSERT_TRUE(first.Wait().ok());
  std::vector<int32_t> other = prompt;
  other.back() = 99;
  p.Submit(second, {other});
  ASSERT_TRUE(second.Wait().ok());
  std::vector<v1::CachedBlock> published;
  {
    std::lock_guard<std::mutex> lock(p.fakes[0]->mu);
    for (const v1::MicrobatchDescriptor& d : p.fakes[0]->descriptors) {
      published.insert(published.end(), d.published_blocks().begin(), d.published_blocks().end());
    }
  }
  // The prompt's two full blocks, then the block its first two generated tokens filled (positions 8..11).
  ASSERT_EQ(published.size(), 3u);
  for (uint32_t b = 0; b < 3; ++b) {
    EXPECT_EQ(published[b].block_index(), b);
    EXPECT_EQ(published[b].sequence_id(), published[0].sequence_id());
  }
  const std::vector<v1::SequenceEntry> entries = p.EntriesOf(1);
  const v1::SequenceEntry& start = entries[entries.size() - 3];  // the second call's prefill, then 2 decode steps
  EXPECT_TRUE(start.is_prefill());
  EXPECT_EQ(start.position_start(), 8u);
  EXPECT_EQ(start.token_ids_size(), 2);
  ASSERT_EQ(start.shared_block_ids_size(), 2);
  EXPECT_EQ(start.shared_block_ids(0), published[0].block_id());
  EXPECT_EQ(start.shared_block_ids(1), published[1].block_id());
  EXPECT_TRUE(start.has_sampling());
  EXPECT_EQ(start.sampling().prompt_tokens(), 10u);

  Recorder penalised(1);
  p.sampling.set_repetition_penalty(1.2f);
  p.Submit(penalised, {prompt});
  ASSERT_TRUE(penalised.Wait().ok());
  EXPECT_EQ(p.EntriesOf(1)[p.EntriesOf(1).size() - 3].position_start(), 0u);
}

// n = 2 (the HTTP layer sends the prompt twice): the first sample computes
// the prompt, the second waits for its two full blocks, maps them and
// computes the rest; each samples with its own seed.
TEST(PipelineDriver, TheSamplesOfOnePromptComputeItOnceWithTheirOwnSeeds) {
  PipelineDriverOptions o;
  o.scheduler.prefix_caching = true;
  o.scheduler.block_size = 4;
  Pipeline p(o);
  p.sampling.set_seed(77);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  Recorder r(2);
  p.Submit(r, {prompt, prompt});
  ASSERT_TRUE(r.Wait().ok());
  std::vector<v1::SequenceEntry> starts;  // each sequence's first entry on the last stage
  for (const v1::SequenceEntry& e : p.EntriesOf(1)) {
    if (e.has_sampling()) starts.push_back(e);
  }
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].position_start(), 0u);
  EXPECT_EQ(starts[1].position_start(), 8u);
  EXPECT_EQ(starts[1].shared_block_ids_size(), 2);
  EXPECT_EQ((std::set<uint64_t>{starts[0].sampling().seed(), starts[1].sampling().seed()}),
            (std::set<uint64_t>{77, SequenceSeed(77, 1)}));
}

TEST(PipelineDriver, ACallWithoutASeedSamplesWithAFreshOne) {
  Pipeline p;
  p.sampling.set_temperature(1.0f);
  Recorder a(1), b(1);
  p.Submit(a, {{1, 2}});
  ASSERT_TRUE(a.Wait().ok());
  p.Submit(b, {{1, 2}});
  ASSERT_TRUE(b.Wait().ok());
  std::vector<uint64_t> seeds;
  for (const v1::SequenceEntry& e : p.EntriesOf(1)) {
    if (e.has_sampling()) seeds.push_back(e.sampling().seed());
  }
  ASSERT_EQ(seeds.size(), 2u);
  EXPECT_NE(seeds[0], seeds[1]);
}

TEST(PipelineDriver, AStopStringEndsTheSequenceWithItsTextCutBeforeIt) {
  Pipeline p;
  p.text = [] { return std::make_unique<NumberText>(); };
  // [10, 20] samples 12, then 15, 19, 24, ...: the text "12,15,19,..." stops at "15,1".
  p.sampling.add_stop("15,1");
  Recorder r(1);
  p.Submit(r, {{10, 20}}, 8);
  ASSERT_TRUE(r.Wait().ok());
  EXPECT_EQ(r.tokens[0], (std::vector<int32_t>{12, 15, 19}));
  EXPECT_EQ(r.texts[0], "12,");
  EXPECT_EQ(r.reasons, (std::vector<FinishReason>{FinishReason::kStopString}));
}

TEST(PipelineDriver, TokensOfTheLastStageReachTheCall) {
  Pipeline p;
  Recorder r(2);
  p.Submit(r, {{10, 20}, {5}});
  ASSERT_TRUE(r.Wait().ok());
  // Prefill [10,20] samples 10+0+2=12; decode 12 at position 2 -> 15; 15 at 3 -> 19.
  EXPECT_EQ(r.tokens[0], (std::vector<int32_t>{12, 15, 19}));
  EXPECT_EQ(r.tokens[1], (std::vector<int32_t>{6, 8, 11}));
  EXPECT_EQ(r.finished, 2);
  EXPECT_EQ(p.fakes[0]->sent.load(), p.fakes[1]->sent.load());
}

// The end of a sequence's wait for admission (vLLM's queue time): once per
// sequence, when its first prefill chunk goes out, before any token; and
// each microbatch's token rows go to the microbatch observer.
TEST(PipelineDriver, EachSequenceIsScheduledOnceBeforeItsFirstToken) {
  Pipeline p;
  std::mutex mu;
  int64_t rows = 0;
  p.driver->ObserveMicrobatches([&](int64_t tokens) {
    std::lock_guard<std::mutex> lock(mu);
    rows += tokens;
  });
  Recorder r(2);
  p.Submit(r, {{10, 20}, {5}});
  ASSERT_TRUE(r.Wait().ok());
  std::vector<int> scheduled = r.scheduled;
  std::sort(scheduled.begin(), scheduled.end());
  EXPECT_EQ(scheduled, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.scheduled_before_token, (std::vector<bool>{true, true}));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(rows, 3 + 2 * 2);  // the prompts' 3 tokens, then 2 decode steps of 2 sequences
}

TEST(PipelineDriver, AStageErrorFailsTheCallWithItsCodeAndWhere) {
  Pipeline p;
  p.fakes[0]->error_code = static_cast<int>(absl::StatusCode::kDataLoss);
  Recorder r(1);
  p.Submit(r, {{1, 2, 3}});
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("stage 0 failed microbatch"));
  EXPECT_THAT(s.message(), HasSubstr("'req-00000000000000c1'"));
  EXPECT_THAT(s.message(), HasSubstr("handoff rejected"));
  EXPECT_EQ(p.driver->StagesUp(), (std::vector<bool>{true, true}));  // the stage still answers
}

// A stage that refuses the stream itself (FAILED_PRECONDITION: a sequence
// number or epoch it did not expect) would fail every later microbatch: the
// pipeline goes down (health NOT_SERVING) and reconnects for a new epoch.
TEST(PipelineDriver, AStageRefusingTheStreamTakesThePipelineDownForANewEpoch) {
  std::atomic<uint64_t> reconnect_epoch{0};
  std::atomic<int> downs{0}, ups{0};
  PipelineDriverOptions o;
  o.on_pipeline_up = [&](bool up) { ++(up ? ups : downs); };
  o.reconnect_interval = std::chrono::milliseconds(10);
  o.reconnect = [&](uint64_t epoch) -> absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> {
    reconnect_epoch = epoch;
    std::vector<std::unique_ptr<StageLink>> links;
    for (int k = 0; k < 2; ++k) links.push_back(std::make_unique<FakeLink>(k == 1, "stage" + std::to_string(k)));
    return links;
  };
  Pipeline p(o);
  p.fakes[0]->error_code = static_cast<int>(absl::StatusCode::kFailedPrecondition);
  Recorder r(1);
  p.Submit(r, {{1, 2, 3}});
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("stage 0 (stage0) is down"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ups.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(reconnect_epoch.load(), 1u);
  EXPECT_EQ(ups.load(), 1);
  EXPECT_EQ(downs.load(), 1);
  Recorder again(1);
  p.Submit(again, {{4, 5}});
  EXPECT_TRUE(again.Wait().ok());
}

// Microbatches that keep failing (any code) mean the pipeline is not serving.
TEST(PipelineDriver, ThreeFailedMicrobatchesInARowTakeThePipelineDown) {
  std::atomic<int> attempts{0};
  PipelineDriverOptions o;
  o.reconnect_interval = std::chrono::milliseconds(10);
  o.reconnect = [&](uint64_t) -> absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> {
    ++attempts;
    return absl::UnavailableError("not yet");
  };
  Pipeline p(o);
  p.fakes[1]->error_code = static_cast<int>(absl::StatusCode::kDataLoss);
  for (int i = 0; i < 2; ++i) {
    Recorder r(1);
    p.Submit(r, {{1, 2, 3}});
    EXPECT_EQ(r.Wait().code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(attempts.load(), 0);
  Recorder third(1);
  p.Submit(third, {{1, 2, 3}});
  const absl::Status s = third.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("3 microbatches in a row failed"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (attempts.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(attempts.load(), 0);
}

TEST(PipelineDriver, ADescriptorOverTheStagesLimitIsNeverSent) {
  PipelineDriverOptions o;
  o.max_descriptor_bytes = 200;
  Pipeline p(o);
  Recorder r(1);
  p.Submit(r, {std::vector<int32_t>(300, 200)});
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("more than the 200 the stages take"));
  EXPECT_EQ(p.fakes[0]->sent.load(), 0);
  EXPECT_EQ(p.driver->StagesUp(), (std::vector<bool>{true, true}));
  Recorder small(1);
  p.Submit(small, {{1}}, 1);
  EXPECT_TRUE(small.Wait().ok());
}

TEST(PipelineDriver, ABrokenStreamEndsEveryCallUnavailable) {
  Pipeline p;
  p.fakes[1]->silent = true;
  Recorder a(1), b(1);
  p.Submit(a, {{1, 2}});
  p.Submit(b, {{3}});
  while (p.fakes[1]->sent.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  p.fakes[1]->Break();
  for (Recorder* r : {&a, &b}) {
    const absl::Status s = r->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("stage 1 (stage1) is down: connection reset"));
  }
  EXPECT_EQ(p.driver->StagesUp(), (std::vector<bool>{true, false}));
  Recorder later(1);
  p.Submit(later, {{4}});
  EXPECT_EQ(later.Wait().code(), absl::StatusCode::kUnavailable);
}

TEST(PipelineDriver, ADownPipelineComesBackThroughReconnectWithALaterEpoch) {
  std::atomic<int> attempts{0};
  std::atomic<uint64_t> reconnect_epoch{0};
  std::atomic<bool> reachable{false};
  std::vector<FakeLink*> fresh;
  std::mutex fresh_mu;
  std::vector<bool> reported;  // on_pipeline_up, which the coordinator's health follows
  std::mutex reported_mu;
  auto reports = [&] {
    std::lock_guard<std::mutex> lock(reported_mu);
    return reported;
  };
  auto wait_reports = [&](const std::vector<bool>& want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (reports() != want && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return reports();
  };
  PipelineDriverOptions o;
  o.on_pipeline_up = [&](bool up) {
    std::lock_guard<std::mutex> lock(reported_mu);
    reported.push_back(up);
  };
  o.reconnect_interval = std::chrono::milliseconds(10);
  o.reconnect = [&](uint64_t epoch) -> absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> {
    ++attempts;
    if (!reachable) return absl::UnavailableError("stage 1 did not answer GetStatus");
    reconnect_epoch = epoch;
    std::vector<std::unique_ptr<StageLink>> links;
    std::lock_guard<std::mutex> lock(fresh_mu);
    for (int k = 0; k < 2; ++k) {
      auto l = std::make_unique<FakeLink>(k == 1, "stage" + std::to_string(k));
      fresh.push_back(l.get());
      links.push_back(std::move(l));
    }
    return links;
  };
  Pipeline p(o);
  const uint64_t epoch_before = p.driver->Epoch();
  p.fakes[1]->silent = true;
  Recorder in_flight(1);
  p.Submit(in_flight, {{1, 2}});
  while (p.fakes[1]->sent.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(reports().empty());  // up from the start: nothing reported
  p.fakes[1]->Break();
  EXPECT_EQ(in_flight.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(wait_reports({false}), (std::vector<bool>{false}));  // down: NOT_SERVING

  // Unreachable: attempts repeat and calls are refused UNAVAILABLE.
  while (attempts.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Recorder refused(1);
  p.Submit(refused, {{4}});
  EXPECT_EQ(refused.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(p.driver->StagesUp(), (std::vector<bool>{true, false}));
  EXPECT_EQ(reports(), (std::vector<bool>{false}));  // failed attempts report nothing

  reachable = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (p.driver->StagesUp() != std::vector<bool>{true, true} && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(p.driver->StagesUp(), (std::vector<bool>{true, true}));
  EXPECT_GT(reconnect_epoch.load(), epoch_before);
  EXPECT_EQ(p.driver->Epoch(), reconnect_epoch.load());
  EXPECT_EQ(wait_reports({false, true}), (std::vector<bool>{false, true}));  // back: SERVING

  Recorder after(1);
  p.Submit(after, {{10, 20}});
  ASSERT_TRUE(after.Wait().ok());
  EXPECT_EQ(after.tokens[0], (std::vector<int32_t>{12, 15, 19}));
  std::lock_guard<std::mutex> lock(fresh_mu);  // the old links are gone; the new ones carried all of it
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0]->sent.load(), 3);
  EXPECT_EQ(fresh[1]->sent.load(), 3);
}

// A stage that never answers (alive, hung) is taken as down once the
// microbatch's budget and the grace after it (at least 2 s) have passed:
// a sound stage answers DEADLINE_EXCEEDED itself at the budget's end.
TEST(PipelineDriver, ASilentStageMissesItsDeadline) {
  Pipeline p;
  p.fakes[0]->silent = true;
  Recorder r(1);
  const auto start = std::chrono::steady_clock::now();
  p.Submit(r, {{1}});
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("stage 0 (stage0) is down: no answer to microbatch"));
  EXPECT_THAT(s.message(), HasSubstr("and 2000 ms of grace"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(p.driver->StagesUp(), (std::vector<bool>{false, true}));
}

// The budget scales with the work: 300 ms + 50 ms for each of 20 prompt
// tokens is 1.3 s, not the 300 ms floor; every stage gets it in the
// descriptor, and a silent one is down after it and the 2 s grace.
TEST(PipelineDriver, TheStageDeadlineGrowsWithTheTokensOwed) {
  PipelineDriverOptions o;
  o.stage_timeout_per_token = std::chrono::milliseconds(50);
  Pipeline p(o);
  p.fakes[1]->silent = true;
  Recorder r(1);
  const auto start = std::chrono::steady_clock::now();
  p.Submit(r, {std::vector<int32_t>(20, 7)});
  const absl::Status s = r.Wait();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("within 1300 ms (300 ms + 50 ms per token owed) and 2000 ms of grace"));
  EXPECT_EQ(p.fakes[0]->last_budget_ms.load(), 1300u);
  EXPECT_EQ(p.fakes[1]->last_budget_ms.load(), 1300u);
  EXPECT_GE(took, std::chrono::milliseconds(3300));
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(PipelineDriver, TheAnswerGraceIsHalfTheFloorWithinTwoAndFiveSeconds) {
  EXPECT_EQ(AnswerGrace(std::chrono::milliseconds(300)), std::chrono::milliseconds(2000));
  EXPECT_EQ(AnswerGrace(std::chrono::milliseconds(6000)), std::chrono::milliseconds(3000));
  EXPECT_EQ(AnswerGrace(std::chrono::milliseconds(60000)), std::chrono::milliseconds(5000));
}

TEST(PipelineDriver, AFullQueueIsResourceExhaustedAndNothingStays) {
  PipelineDriverOptions o;
  o.scheduler.max_queue = 1;
  Pipeline p(o);
  Recorder r(2);
  p.Submit(r, {{1}, {2}});
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("request 'req-00000000000000c1' prompt 1:"));
  Recorder ok(1);
  p.Submit(ok, {{1}});
  EXPECT_TRUE(ok.Wait().ok());
}

TEST(PipelineDriver, TheClientsDeadlineEndsTheCall) {
  Pipeline p;
  p.fakes[0]->silent = true;  // would take the stage timeout (300 ms)
  Recorder r(1);
  p.Submit(r, {{1}}, 3, false, std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("request 'req-00000000000000c1' passed its deadline"));
}

TEST(PipelineDriver, ScoringWithoutLogprobsFromTheStagesIsUnimplemented) {
  Pipeline p;
  Recorder r(1);
  p.Submit(r, {{1, 2, 3}}, 1, true);
  const absl::Status s = r.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("scoring needs 2 token log-probs, the last stage returned 0"));
}

TEST(PipelineDriver, ShutdownAnswersEveryLiveCall) {
  Pipeline p;
  p.fakes[1]->silent = true;
  Recorder r(1);
  p.Submit(r, {{1}});
  while (p.fakes[1]->sent.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  p.driver->Shutdown();
  EXPECT_EQ(r.Wait().code(), absl::StatusCode::kUnavailable);
}

// With an ITL target the driver times every microbatch the stages answer
// and reports it to the scheduler, whose fit then holds one sample each.
TEST(PipelineDriver, EveryAnsweredStepIsTimedForTheStepTimeFit) {
  PipelineDriverOptions o;
  o.scheduler.chunked_prefill = true;
  o.scheduler.prefill_chunk_tokens = 2;
  o.scheduler.itl_target_ms = 50;
  Pipeline p(o);
  Recorder r(2);
  p.Submit(r, {{1, 2, 3, 4, 5}, {6, 7, 8}}, /*max_new=*/6);
  ASSERT_TRUE(r.Wait().ok());
  EXPECT_EQ(r.tokens[0].size(), 6u);
  const int sent = p.fakes[1]->sent.load();
  ASSERT_GT(sent, 0);
  // The load is published at the end of the driver's round that ended the call.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (p.driver->CurrentLoad().step_budget.samples < sent && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(p.driver->CurrentLoad().step_budget.samples, sent);
}

}  // namespace
}  // namespace seam::coordinator

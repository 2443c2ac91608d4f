// Two seam-stage processes as one pipeline, handing activations over UCX
// (TCP in PEER mode): their tokens must equal a single stage's, a dead
// previous stage fails the waiting microbatch within the handoff timeout, and
// a reload cuts the first stage's wait for the last stage's tokens.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/server/stage_server.h"
#include "seam/v1/stream_state.pb.h"
#include "stage_fixtures.h"
#include "stage_process.h"

namespace seam::server {
namespace {

using namespace testing;  // NOLINT: the fixtures of these tests

const std::string kHandoffKey(32, 'k');

// Configures `first` (layer 0) and `second` (layer 1) as a two-stage pipeline.
void ConfigurePipeline(StageProcess& first, StageProcess& second, uint32_t tp, uint32_t attn_dp = 1) {
  const v1::WorkerAddress first_address = GetStatus(first).worker_address();
  const v1::WorkerAddress second_address = GetStatus(second).worker_address();
  v1::StageConfig a = SingleStage(), b = SingleStage();
  a.set_tp_size(tp);
  b.set_tp_size(tp);
  a.set_attn_dp_size(attn_dp);
  b.set_attn_dp_size(attn_dp);
  a.set_pipeline_size(2);
  b.set_pipeline_size(2);
  a.set_last_layer(0);
  b.set_pipeline_rank(1);
  b.set_first_layer(1);
  *a.mutable_next_stage() = second_address;
  *b.mutable_previous_stage() = first_address;
  a.set_handoff_key(kHandoffKey);  // as the coordinator hands out per epoch
  b.set_handoff_key(kHandoffKey);
  grpc::Status rpc;
  v1::StageStatus status = Configure(first, a, &rpc);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(status.state(), v1::STAGE_STATE_READY) << status.error();
  status = Configure(second, b, &rpc);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(status.state(), v1::STAGE_STATE_READY) << status.error();
}

std::vector<v1::MicrobatchDescriptor> Prefill() {
  v1::MicrobatchDescriptor d = Descriptor(10, 1);
  AddSequence(d, 1, {3, 14, 15, 92, 65}, 0, true);
  AddSequence(d, 2, {35, 89, 79}, 0, true);
  return {d};
}

v1::MicrobatchDescriptor Decode(const std::vector<int32_t>& last) {
  v1::MicrobatchDescriptor d = Descriptor(11, 2);
  AddSequence(d, 1, {last[0]}, 5, false);
  AddSequence(d, 2, {last[1]}, 3, false);
  return d;
}

// Prefill then one decode step on a single stage: the tokens of each.
std::vector<std::vector<int32_t>> SingleStageTokens() {
  StageProcess stage;
  grpc::Status rpc;
  EXPECT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  RunClient run(stage);
  const std::vector<int32_t> first = SampledTokens(run.Exchange(Prefill()[0]));
  const std::vector<int32_t> second = SampledTokens(run.Exchange(Decode(first)));
  EXPECT_TRUE(run.Close().ok());
  return {first, second};
}

// Sends `d` to both stages (same order to every stage, as the coordinator
// does) and returns the last stage's answer after checking the first's ack.
v1::MicrobatchResult RunOnBoth(RunClient& first, RunClient& second, const v1::MicrobatchDescriptor& d) {
  EXPECT_TRUE(first.Write(d));
  EXPECT_TRUE(second.Write(d));
  const v1::MicrobatchResult ack = first.Read();
  EXPECT_FALSE(ack.has_error()) << ack.error().message();
  EXPECT_EQ(ack.microbatch_id(), d.microbatch_id());
  EXPECT_EQ(ack.sequences_size(), 0);
  return second.Read();
}

void ExpectPipelineEqualsSingleStage(uint32_t tp, const std::string& ucx_mode) {
  const std::vector<std::vector<int32_t>> want = SingleStageTokens();
  StageProcess first({"--ucx-mode", ucx_mode}), second({"--ucx-mode", ucx_mode});
  ConfigurePipeline(first, second, tp);
  RunClient run_first(first), run_second(second);
  const v1::MicrobatchResult prefill = RunOnBoth(run_first, run_second, Prefill()[0]);
  ASSERT_FALSE(prefill.has_error()) << prefill.error().message();
  EXPECT_EQ(SampledTokens(prefill), want[0]);
  const v1::MicrobatchResult decode = RunOnBoth(run_first, run_second, Decode(SampledTokens(prefill)));
  ASSERT_FALSE(decode.has_error()) << decode.error().message();
  EXPECT_EQ(SampledTokens(decode), want[1]);
  EXPECT_TRUE(run_first.Close().ok());
  EXPECT_TRUE(run_second.Close().ok());
}

TEST(PipelineStages, TwoStagesOverUcxTcpGiveTheSingleStageTokens) { ExpectPipelineEqualsSingleStage(1, "tcp"); }

TEST(PipelineStages, TwoStagesOfTp2GiveTheSingleStageTokens) { ExpectPipelineEqualsSingleStage(2, "tcp"); }

TEST(PipelineStages, TwoStagesOverSharedMemoryGiveTheSingleStageTokens) {
  ExpectPipelineEqualsSingleStage(1, "shm");
}

// The receiver drops a header of another microbatch (without shifting the
// stream) and waits for its own until the handoff timeout.
TEST(PipelineStages, AMismatchedHandoffIsDroppedAndBothStagesServeTheNextMicrobatch) {
  StageProcess first({"--ucx-mode", "tcp"}), second({"--ucx-mode", "tcp", "--handoff-timeout", "3"});
  ConfigurePipeline(first, second, 1);
  RunClient run_first(first), run_second(second);
  // The second stage is told of microbatch 11 where the first ran 10.
  v1::MicrobatchDescriptor ran = Prefill()[0], told = Prefill()[0];
  told.set_microbatch_id(11);
  ASSERT_TRUE(run_first.Write(ran));
  ASSERT_TRUE(run_second.Write(told));
  EXPECT_FALSE(run_first.Read().has_error());
  // The handoff of microbatch 10 is dropped as another microbatch's; the wait
  // for 11 ends at its deadline, saying what it dropped.
  ExpectError(run_second.Read(), absl::StatusCode::kDeadlineExceeded, "header of microbatch 10 while expecting 11");
  EXPECT_EQ(GetStatus(second).handoff_drops().unexpected_microbatch(), 1u);

  v1::MicrobatchDescriptor fresh = Descriptor(12, 2);
  AddSequence(fresh, 3, {7, 8, 9}, 0, true);
  const v1::MicrobatchResult result = RunOnBoth(run_first, run_second, fresh);
  ASSERT_FALSE(result.has_error()) << result.error().message();
  EXPECT_EQ(result.sequences_size(), 1);
  EXPECT_TRUE(run_first.Close().ok());
  EXPECT_TRUE(run_second.Close().ok());
}

TEST(PipelineStages, AHandoffThatArrivesAfterItsWaitIsDiscardedAndTheNextMicrobatchRuns) {
  StageProcess first({"--ucx-mode", "tcp"}), second({"--ucx-mode", "tcp", "--handoff-timeout", "1"});
  ConfigurePipeline(first, second, 1);
  RunClient run_first(first), run_second(second);
  ExpectError(run_second.Exchange(Prefill()[0]), absl::StatusCode::kDeadlineExceeded, "handoff from pipeline rank 0");
  EXPECT_FALSE(run_first.Exchange(Prefill()[0]).has_error());  // its handoff now waits at the second stage

  v1::MicrobatchDescriptor fresh = Descriptor(12, 2);
  AddSequence(fresh, 3, {7, 8, 9}, 0, true);
  const v1::MicrobatchResult result = RunOnBoth(run_first, run_second, fresh);
  ASSERT_FALSE(result.has_error()) << result.error().message();
  EXPECT_EQ(result.sequences_size(), 1);
  EXPECT_TRUE(run_first.Close().ok());
  EXPECT_TRUE(run_second.Close().ok());
}

// A stage's waits follow the microbatch's budget (MicrobatchDescriptor
// .budget_ms), not --handoff-timeout (30 s here): the second stage answers
// DEADLINE_EXCEEDED naming itself once the budget is spent; the handoff the
// first stage sends afterwards is taken off the wire as late while the
// second idles (its send completes), and the next microbatch runs on both.
TEST(PipelineStages, AMicrobatchThatRunsOutOfItsBudgetFailsAloneNamingTheStage) {
  StageProcess first({"--ucx-mode", "tcp"}), second({"--ucx-mode", "tcp", "--handoff-timeout", "30"});
  ConfigurePipeline(first, second, 1);
  RunClient run_first(first), run_second(second);
  v1::MicrobatchDescriptor late = Prefill()[0];
  late.set_budget_ms(500);
  const auto start = std::chrono::steady_clock::now();
  ExpectError(run_second.Exchange(late), absl::StatusCode::kDeadlineExceeded,
              "pipeline rank 1: microbatch 10 ran out of its budget of 500 ms waiting for its handoff");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
  late.set_budget_ms(60000);  // the first stage runs it in time and sends: too late for the second
  EXPECT_FALSE(run_first.Exchange(late).has_error());
  v1::MicrobatchDescriptor spent = Descriptor(11, 2);
  AddSequence(spent, 3, {7, 8, 9}, 0, true);
  spent.set_budget_ms(1);
  ExpectError(run_second.Exchange(spent), absl::StatusCode::kDeadlineExceeded,
              "pipeline rank 1: microbatch 11 ran out of its budget of 1 ms waiting for its handoff");
  // The first stage makes the millisecond, skips it, or runs out of it while
  // computing (a loaded machine); a handoff it sends is late either way.
  const v1::MicrobatchResult first_spent = run_first.Exchange(spent);
  if (first_spent.has_error()) {
    ExpectError(first_spent, absl::StatusCode::kDeadlineExceeded,
                "pipeline rank 0: microbatch 11 ran out of its budget of 1 ms");
    const std::string& why = first_spent.error().message();
    EXPECT_TRUE(why.find("before this stage ran it") != std::string::npos ||
                why.find("while this stage computed it") != std::string::npos)
        << why;
  }

  v1::MicrobatchDescriptor fresh = Descriptor(12, 3);
  AddSequence(fresh, 4, {7, 8, 9}, 0, true);
  fresh.set_budget_ms(60000);
  const v1::MicrobatchResult result = RunOnBoth(run_first, run_second, fresh);
  ASSERT_FALSE(result.has_error()) << result.error().message();
  EXPECT_EQ(result.sequences_size(), 1);
  EXPECT_GE(GetStatus(second).handoff_drops().unexpected_microbatch(), 1u) << "the late handoff was not counted";
  EXPECT_TRUE(run_first.Close().ok());
  EXPECT_TRUE(run_second.Close().ok());
}

TEST(PipelineStages, ADeadPreviousStageFailsTheWaitingMicrobatchInsteadOfHanging) {
  StageProcess first({"--ucx-mode", "tcp"}), second({"--ucx-mode", "tcp", "--handoff-timeout", "3"});
  ConfigurePipeline(first, second, 1);
  ASSERT_TRUE(first.SignalAndWait(SIGKILL, 10.0).has_value());

  RunClient run(second);
  const auto start = std::chrono::steady_clock::now();
  const v1::MicrobatchResult result = run.Exchange(Prefill()[0]);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.has_error());
  const int code = result.error().code();
  EXPECT_TRUE(code == static_cast<int>(absl::StatusCode::kUnavailable) ||
              code == static_cast<int>(absl::StatusCode::kDeadlineExceeded))
      << result.error().message();
  EXPECT_NE(result.error().message().find("handoff from pipeline rank 0"), std::string::npos)
      << result.error().message();
  EXPECT_EQ(result.error().pipeline_rank(), 1u);
  EXPECT_LT(waited, 8.0);

  // The stage still answers: the next microbatch fails the same way, promptly.
  v1::MicrobatchDescriptor next = Decode({1, 2});
  const v1::MicrobatchResult again = run.Exchange(next);
  EXPECT_TRUE(again.has_error());
  EXPECT_TRUE(run.Close().ok());
}

TEST(PipelineStages, TheDescriptorsDpGroupPlacesEachSequenceOnEveryStage) {
  StageProcess first, second;
  ConfigurePipeline(first, second, /*tp=*/2, /*attn_dp=*/2);
  const uint64_t blocks = GetStatus(first).limits().kv_blocks_per_dp_group();
  ASSERT_GT(blocks, 4u);
  ASSERT_EQ(GetStatus(second).limits().kv_blocks_per_dp_group(), blocks);
  // Uneven prompts; round-robin would put sequence 1 on DP group 0 and 2 on group 1.
  v1::MicrobatchDescriptor d = Descriptor(10, 1);
  AddSequence(d, 1, std::vector<int32_t>(20, 5), 0, true);  // 2 blocks of 16
  AddSequence(d, 2, {35, 89, 79}, 0, true);                  // 1 block
  AddSequence(d, 3, {3, 14, 15, 92, 65}, 0, true);           // 1 block
  d.mutable_sequences(0)->set_dp_group(1);
  d.mutable_sequences(1)->set_dp_group(1);
  d.mutable_sequences(2)->set_dp_group(0);
  RunClient run_first(first), run_second(second);
  const v1::MicrobatchResult result = RunOnBoth(run_first, run_second, d);
  ASSERT_FALSE(result.has_error()) << result.error().message();
  for (StageProcess* stage : {&first, &second}) {
    const v1::StageStatus s = GetStatus(*stage);
    ASSERT_EQ(s.kv_free_blocks_size(), 2);
    EXPECT_EQ(s.kv_free_blocks(0), blocks - 1) << "stage " << s.config().pipeline_rank();
    EXPECT_EQ(s.kv_free_blocks(1), blocks - 3) << "stage " << s.config().pipeline_rank();
  }
  EXPECT_TRUE(run_first.Close().ok());
  EXPECT_TRUE(run_second.Close().ok());
}

// An endpoint the coordinator never named sends the second stage's UCX
// worker a 64-byte message and a header claiming 64 GiB, both tagged as a
// header of the next real microbatch would have been before link tags: each
// is a stray, taken off the wire unread and counted as from an unknown peer,
// nothing is allocated for the claim, and the real microbatches still run in order.
TEST(PipelineStages, ForgedUcxMessagesAreDroppedAndCountedAndTheStreamGoesOn) {
  StageProcess first({"--ucx-mode", "tcp"}), second({"--ucx-mode", "tcp", "--handoff-timeout", "5"});
  ConfigurePipeline(first, second, 1);
  const v1::StageStatus before = GetStatus(second);
  EXPECT_TRUE(before.config().handoff_key().empty()) << "the key must not be echoed";
  EXPECT_EQ(before.handoff_drops().ByteSizeLong(), 0u);

  handoff::UcxWorkerOptions options;
  options.config = TcpUcxConfig("127.0.0.1", std::getenv("UCX_NET_DEVICES") != nullptr);
  auto forger = handoff::UcxWorker::Create(options);
  ASSERT_TRUE(forger.ok()) << forger.status();
  auto endpoint = (*forger)->Connect(before.worker_address().ucx_address());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const uint64_t next_microbatch = Prefill()[0].microbatch_id();
  const std::string garbage(64, '\x5a');
  absl::Status sent = (*forger)->Send(*endpoint, handoff::HandoffTag(handoff::HandoffKind::kHeader, next_microbatch, 0), garbage.data(),
                                      garbage.size(), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(sent.ok()) << sent;
  v1::StreamState claim;
  claim.set_microbatch_id(next_microbatch);
  claim.set_sequence_number(1);
  claim.set_epoch(kEpoch);
  v1::TensorDesc* huge = claim.add_tensors();
  huge->set_name("r0.hidden");
  huge->set_dtype(v1::DTYPE_F32);
  huge->add_shape(int64_t{1} << 28);
  huge->add_shape(64);
  huge->set_byte_size(uint64_t{64} << 30);
  const std::string bytes = claim.SerializeAsString();
  sent = (*forger)->Send(*endpoint, handoff::HandoffTag(handoff::HandoffKind::kHeader, next_microbatch, 0), bytes.data(), bytes.size(),
                         absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(sent.ok()) << sent;

  RunClient run_first(first), run_second(second);
  const v1::MicrobatchResult prefill = RunOnBoth(run_first, run_second, Prefill()[0]);
  ASSERT_FALSE(prefill.has_error()) << prefill.error().message();
  EXPECT_EQ(prefill.sequences_size(), 2);
  const v1::MicrobatchResult decode = RunOnBoth(run_first, run_second, Decode(SampledTokens(prefill)));
  ASSERT_FALSE(decode.has_error()) << decode.error().message();
  EXPECT_EQ(decode.sequences_size(), 2);

  // Strays are drained every drain_interval (20 ms) while the stage idles.
  v1::HandoffDrops drops = GetStatus(second).handoff_drops();
  for (const absl::Time until = absl::Now() + absl::Seconds(3); drops.unknown_peer() < 2 && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(20));
    drops = GetStatus(second).handoff_drops();
  }
  EXPECT_EQ(drops.unknown_peer(), 2u) << drops.ShortDebugString();
  EXPECT_EQ(drops.bad_mac() + drops.oversized() + drops.malformed() + drops.unexpected_microbatch(), 0u)
      << drops.ShortDebugString();
  EXPECT_EQ(GetStatus(second).state(), v1::STAGE_STATE_READY);
  EXPECT_TRUE(run_first.Close().ok());
  EXPECT_TRUE(run_second.Close().ok());
}

// The first of two stages waits for the tokens of step 1 of a multi-step
// decode from the last stage, played here by a UCX worker with the epoch's
// key: it sends the tokens' header and is gone before their payload. The
// Configure of the next epoch must reload the first stage at once, its wait
// for the payload cut as a wait for a header is (that receiver watches no
// endpoint, so nothing else ends it before the microbatch's budget: 20 s
// here). A kill -9 of the last stage landing there held a recovery of the
// chaos suite 11.78 s.
TEST(PipelineStages, AReloadCutsTheFirstStagesWaitForATokenPayloadThatNeverComes) {
  StageProcess first({"--ucx-mode", "tcp"});
  handoff::UcxWorkerOptions options;
  options.config = TcpUcxConfig("127.0.0.1", std::getenv("UCX_NET_DEVICES") != nullptr);
  auto last = handoff::UcxWorker::Create(options);
  ASSERT_TRUE(last.ok()) << last.status();
  v1::StageConfig config = SingleStage();
  config.set_pipeline_size(2);
  config.set_last_layer(0);
  config.mutable_next_stage()->set_ucx_address((*last)->Address());
  config.set_handoff_key(kHandoffKey);
  grpc::Status rpc;
  ASSERT_EQ(Configure(first, config, &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  auto to_first = (*last)->Connect(GetStatus(first).worker_address().ucx_address());
  ASSERT_TRUE(to_first.ok()) << to_first.status();

  RunClient run(first);
  v1::MicrobatchDescriptor prefill = Descriptor(10, 1);
  AddSequence(prefill, 1, {3, 14, 15}, 0, true);
  ASSERT_TRUE(run.Write(prefill));
  v1::MicrobatchDescriptor wave = Descriptor(11, 2);
  AddSequence(wave, 1, {7}, 3, false);
  wave.set_decode_steps(2);
  wave.set_wave_size(1);
  wave.set_budget_ms(20000);
  ASSERT_TRUE(run.Write(wave));
  for (const absl::Time until = absl::Now() + absl::Milliseconds(500); absl::Now() < until;) (*last)->Progress();

  v1::StreamState header;
  header.set_microbatch_id(11);
  header.set_sequence_number(2);
  header.set_epoch(kEpoch);
  header.set_decode_step(1);
  header.set_token_count(1);
  handoff::HandoffSenderOptions send;
  send.key = kHandoffKey;
  // The header goes out (Close flushes it); the payload's send then finds the endpoint closed.
  send.after_checksum = [&](size_t, std::vector<char>&) { (void)to_first->Close(absl::Now() + absl::Seconds(2)); };
  handoff::HandoffSender sender(**last, *to_first, send);
  const absl::Status sent =
      sender.Send(header, {{"tokens", Tensor::FromInts({5}, {1})}}, absl::Now() + absl::Seconds(5));
  ASSERT_FALSE(sent.ok()) << "the payload was meant never to leave";
  for (const absl::Time until = absl::Now() + absl::Milliseconds(300); absl::Now() < until;) (*last)->Progress();

  config.set_epoch(kEpoch + 1);
  // The reload closes its endpoint to this worker, and connects to it again:
  // this side progresses meanwhile, as a live peer would.
  std::atomic<bool> reloading{true};
  std::thread progress([&] {
    while (reloading) (*last)->Progress();
  });
  const auto start = std::chrono::steady_clock::now();
  const v1::StageStatus reloaded = Configure(first, config, &rpc);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  reloading = false;
  progress.join();
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(reloaded.state(), v1::STAGE_STATE_READY) << reloaded.error();
  EXPECT_EQ(reloaded.config().epoch(), kEpoch + 1);
  // The reload waits only for the cut (polled every 20 ms) and a load of a
  // two-layer model; 3 s leaves room for a loaded machine, far below 20 s.
  EXPECT_LT(took, 3.0);
  const v1::MicrobatchResult ack = run.Read();
  EXPECT_FALSE(ack.has_error()) << ack.error().message();  // the prefill's
  const v1::MicrobatchResult cut = run.Read();
  EXPECT_EQ(cut.microbatch_id(), 11u);
  ExpectError(cut, absl::StatusCode::kUnavailable, "tensor 'tokens' of microbatch 11");
  std::printf("reload for the next epoch %.3f s after its Configure: %s\n", took, cut.error().message().c_str());
  EXPECT_TRUE(run.Close().ok());
  while ((*last)->TakeUnread(0, 0).has_value()) {
  }  // the first stage's handoffs, which nobody here receives
}

}  // namespace
}  // namespace seam::server

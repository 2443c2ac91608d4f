// End-to-end tests of seam-stage: real child processes, real gRPC on
// loopback, a tiny random checkpoint. Tokens are compared with an in-process
// StageGroup over the same checkpoint.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "seam/runtime/stage_group.h"
#include "seam/server/stage_server.h"
#include "stage_fixtures.h"
#include "stage_process.h"

namespace seam::server {
namespace {

using namespace testing;  // NOLINT: the fixtures of these tests

TEST(StageServer, TcpModeKeepsUcxOnLoopbackOnlyForALoopbackListenAddress) {
  using Config = std::vector<std::pair<std::string, std::string>>;
  const Config loopback = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  const Config any_device = {{"TLS", "tcp"}};
  EXPECT_EQ(TcpUcxConfig("127.0.0.1", false), loopback);
  EXPECT_EQ(TcpUcxConfig("localhost", false), loopback);
  EXPECT_EQ(TcpUcxConfig("127.0.0.1", true), any_device);  // UCX_NET_DEVICES decides
  EXPECT_EQ(TcpUcxConfig("0.0.0.0", false), any_device);   // a pod: reachable from other hosts
  EXPECT_EQ(TcpUcxConfig("10.0.0.7", false), any_device);
}

TEST(StageServer, HealthIsNotServingUntilConfiguredThenServing) {
  StageProcess stage;
  EXPECT_EQ(stage.CheckHealth(), Health::kNotServing);
  v1::StageStatus status;
  ASSERT_TRUE(stage.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.state(), v1::STAGE_STATE_UNCONFIGURED);
  EXPECT_FALSE(status.worker_address().ucx_address().empty());
  EXPECT_EQ(status.worker_address().host(), "127.0.0.1");

  grpc::Status rpc;
  status = Configure(stage, SingleStage(), &rpc);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(status.state(), v1::STAGE_STATE_READY) << status.error();
  EXPECT_EQ(stage.CheckHealth(), Health::kServing);
}

// The coordinator reports the stages' dtype as ModelFacts.dtype: each stage
// says what --dtype it computes in, before and after Configure.
TEST(StageServer, StatusReportsTheDtypeTheStageComputesIn) {
  StageProcess f32, bf16({"--dtype", "bf16"});
  v1::StageStatus status;
  ASSERT_TRUE(f32.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.dtype(), v1::DTYPE_F32);
  ASSERT_TRUE(bf16.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.dtype(), v1::DTYPE_BF16);
}

TEST(StageServer, GreedyTokensEqualInProcessStageGroup) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  const std::vector<int32_t> a = {3, 14, 15, 92, 65}, b = {35, 89, 79};

  RunClient run(stage);
  v1::MicrobatchDescriptor prefill = Descriptor(100, 1);
  AddSequence(prefill, 1, a, 0, true);
  AddSequence(prefill, 2, b, 0, true);
  v1::MicrobatchResult first = run.Exchange(prefill);
  ASSERT_FALSE(first.has_error()) << first.error().message();
  EXPECT_EQ(first.microbatch_id(), 100u);
  const std::vector<int32_t> got_prefill = SampledTokens(first);
  ASSERT_EQ(got_prefill.size(), 2u);

  v1::MicrobatchDescriptor decode = Descriptor(101, 2);
  AddSequence(decode, 1, {got_prefill[0]}, a.size(), false);
  AddSequence(decode, 2, {got_prefill[1]}, b.size(), false);
  v1::MicrobatchResult second = run.Exchange(decode);
  ASSERT_FALSE(second.has_error()) << second.error().message();
  const std::vector<int32_t> got_decode = SampledTokens(second);
  EXPECT_TRUE(run.Close().ok());

  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> group =
      runtime::StageGroup::Create(CheckpointDir(), 1, 1, boundary::ReductionPolicy::kAuto);
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<int32_t> want_prefill = ReferenceArgmax(**group, {{1, a, 0}, {2, b, 0}});
  EXPECT_EQ(got_prefill, want_prefill);
  const std::vector<int32_t> want_decode = ReferenceArgmax(
      **group, {{1, {want_prefill[0]}, static_cast<int64_t>(a.size())},
                {2, {want_prefill[1]}, static_cast<int64_t>(b.size())}});
  EXPECT_EQ(got_decode, want_decode);
}

TEST(StageServer, BadDescriptorsAreRejectedAndTheStageKeepsServing) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  RunClient run(stage);

  v1::MicrobatchDescriptor stale = Descriptor(1, 1);
  stale.set_epoch(kEpoch + 1);
  AddSequence(stale, 1, {5, 6}, 0, true);
  ExpectError(run.Exchange(stale), absl::StatusCode::kFailedPrecondition, "epoch");

  v1::MicrobatchDescriptor out_of_vocab = Descriptor(2, 1);
  AddSequence(out_of_vocab, 1, {5, 128}, 0, true);
  ExpectError(run.Exchange(out_of_vocab), absl::StatusCode::kInvalidArgument, "sequences[0].token_ids[1]");

  // A descriptor in order but with bad contents still takes its sequence number.
  ExpectError(run.Exchange(Descriptor(3, 2)), absl::StatusCode::kInvalidArgument, "sequences");

  v1::MicrobatchDescriptor good = Descriptor(4, 3);
  AddSequence(good, 1, {5, 6, 7}, 0, true);
  v1::MicrobatchResult ok = run.Exchange(good);
  ASSERT_FALSE(ok.has_error()) << ok.error().message();
  ASSERT_EQ(ok.sequences_size(), 1);

  v1::MicrobatchDescriptor replayed = Descriptor(5, 3);
  AddSequence(replayed, 2, {8}, 0, true);
  ExpectError(run.Exchange(replayed), absl::StatusCode::kFailedPrecondition, "sequence_number");
  // A jump ahead (anyone who reaches the port could send one) is refused
  // without moving the stage's counter, so the real stream goes on.
  v1::MicrobatchDescriptor ahead = Descriptor(7, 1000000000000);
  AddSequence(ahead, 2, {8}, 0, true);
  ExpectError(run.Exchange(ahead), absl::StatusCode::kFailedPrecondition, "expects 4");

  v1::MicrobatchDescriptor next = Descriptor(6, 4);
  AddSequence(next, 1, {ok.sequences(0).sampled_token()}, 3, false);
  next.add_finished_sequence_ids(99);  // unknown: freeing it is harmless
  v1::MicrobatchResult later = run.Exchange(next);
  ASSERT_FALSE(later.has_error()) << later.error().message();
  EXPECT_EQ(later.sequences_size(), 1);
  EXPECT_TRUE(run.Close().ok());

  v1::StageStatus status;
  ASSERT_TRUE(stage.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.last_sequence_number(), 4u);
  EXPECT_EQ(status.microbatches_in_flight(), 0u);
  EXPECT_EQ(stage.CheckHealth(), Health::kServing);
}

TEST(StageServer, ConfigureChecksTheLayerRangeAndRefusesADifferentSecondConfig) {
  StageProcess stage;
  grpc::Status rpc;
  v1::StageConfig beyond = SingleStage();
  beyond.set_last_layer(5);
  Configure(stage, beyond, &rpc);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(rpc.error_message().find("last_layer"), std::string::npos) << rpc.error_message();

  v1::StageConfig missing = SingleStage();
  missing.set_model_dir(CheckpointDir() + "/no-such-model");
  Configure(stage, missing, &rpc);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(rpc.error_message().find("model_dir"), std::string::npos) << rpc.error_message();

  v1::StageConfig no_tp = SingleStage();
  no_tp.set_tp_size(0);
  Configure(stage, no_tp, &rpc);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(rpc.error_message().find("tp_size"), std::string::npos) << rpc.error_message();

  EXPECT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  EXPECT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY);
  EXPECT_TRUE(rpc.ok());
  v1::StageConfig other = SingleStage();
  other.set_tp_size(2);
  Configure(stage, other, &rpc);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << rpc.error_message();
  other.set_epoch(kEpoch + 1);  // a later epoch reloads the same layout only
  Configure(stage, other, &rpc);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << rpc.error_message();
}

TEST(StageServer, ALaterEpochOfTheSameLayoutReloadsTheStage) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  RunClient run(stage);
  v1::MicrobatchDescriptor before = Descriptor(1, 1);
  AddSequence(before, 1, {5, 6}, 0, true);
  ASSERT_FALSE(run.Exchange(before).has_error());

  v1::StageConfig next = SingleStage();
  next.set_epoch(kEpoch + 1);
  EXPECT_EQ(Configure(stage, next, &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  EXPECT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(stage.CheckHealth(), Health::kServing);

  v1::MicrobatchDescriptor old_epoch = Descriptor(2, 2);
  AddSequence(old_epoch, 2, {7, 8}, 0, true);
  ExpectError(run.Exchange(old_epoch), absl::StatusCode::kFailedPrecondition, "epoch");
  v1::MicrobatchDescriptor after = Descriptor(3, 1);  // a new epoch starts at sequence number 1
  after.set_epoch(kEpoch + 1);
  AddSequence(after, 1, {5, 6}, 0, true);  // sequence 1 again: the reload dropped its KV cache
  EXPECT_FALSE(run.Exchange(after).has_error());

  v1::StageConfig older = SingleStage();  // not a later epoch any more
  Configure(stage, older, &rpc);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << rpc.error_message();
}

TEST(StageServer, DrainStopsTheStageAndRefusesLaterMicrobatches) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  v1::StageStatus drained;
  ASSERT_TRUE(stage.stub().Drain(Context().get(), v1::DrainRequest(), &drained).ok());
  EXPECT_EQ(drained.state(), v1::STAGE_STATE_STOPPED);
  EXPECT_EQ(stage.CheckHealth(), Health::kNotServing);

  RunClient run(stage);
  v1::MicrobatchDescriptor d = Descriptor(1, 1);
  AddSequence(d, 1, {5}, 0, true);
  ExpectError(run.Exchange(d), absl::StatusCode::kFailedPrecondition, "draining");
  EXPECT_TRUE(run.Close().ok());
}

TEST(StageServer, SigtermDrainsAndExitsZero) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  std::optional<int> code = stage.SignalAndWait(SIGTERM, 15.0);
  ASSERT_TRUE(code.has_value()) << "seam-stage did not exit within 15 s of SIGTERM";
  EXPECT_EQ(*code, 0);
}

TEST(StageServer, ShutdownCallExitsZero) {
  StageProcess stage;
  v1::StageStatus status;
  ASSERT_TRUE(stage.stub().Shutdown(Context().get(), v1::ShutdownRequest(), &status).ok());
  EXPECT_EQ(status.state(), v1::STAGE_STATE_STOPPED);
  std::optional<int> code = stage.SignalAndWait(0, 15.0);
  ASSERT_TRUE(code.has_value()) << "seam-stage did not exit within 15 s of Shutdown";
  EXPECT_EQ(*code, 0);
}

TEST(StageServer, ShutdownAbandoningInFlightWorkExitsZero) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  v1::ShutdownRequest request;
  request.set_abandon_in_flight(true);
  v1::StageStatus status;
  ASSERT_TRUE(stage.stub().Shutdown(Context().get(), request, &status).ok());
  EXPECT_EQ(status.state(), v1::STAGE_STATE_STOPPED);
  std::optional<int> code = stage.SignalAndWait(0, 15.0);
  ASSERT_TRUE(code.has_value()) << "seam-stage did not exit within 15 s of Shutdown";
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace seam::server

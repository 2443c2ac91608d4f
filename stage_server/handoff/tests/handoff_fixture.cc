// The two- and three-process handoff fixture; see handoff_fixture.h.
#include "tests/handoff_fixture.h"

#include <cstdio>

namespace seam::handoff::testing {
namespace {

// The body of a child: connect, run the script, then stay (progressing) until
// the parent says it has everything.
std::unique_ptr<PeerProcess> Fork(UcxErrorMode mode, SendScript script, const char* who) {
  return std::make_unique<PeerProcess>([mode, script, who](Channel& channel) {
    PeerSide side;
    if (!ConnectChild(channel, mode, side)) return 2;
    const absl::Status sent = script(*side.worker, side.endpoint, channel);
    if (!sent.ok()) std::fprintf(stderr, "%s: %s\n", who, sent.ToString().c_str());
    const bool done = channel.Read(absl::Seconds(15), [&] { side.worker->Progress(); }).ok();
    return sent.ok() && done ? 0 : 3;
  });
}

}  // namespace

v1::StreamState Header(uint64_t microbatch, uint64_t sequence, uint64_t epoch) {
  v1::StreamState header;
  header.set_microbatch_id(microbatch);
  header.set_sequence_number(sequence);
  header.set_epoch(epoch);
  header.set_state(v1::StreamState::STATE_WRITTEN);
  header.mutable_owed()->set_sum_group(v1::SUM_GROUP_NONE);
  header.set_token_count(7);
  return header;
}

Tensors MakeTensors(int64_t hidden_cols) {
  std::vector<float> hidden(7 * hidden_cols);
  std::vector<float> residual(7 * 96);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = 0.25f * static_cast<float>(i % 37) - 3.0f;
  for (size_t i = 0; i < residual.size(); ++i) residual[i] = 0.5f * static_cast<float>(i % 11);
  return {{"hidden", Tensor::FromFloats(hidden, {7, hidden_cols}, DType::kF32)},
          {"residual", Tensor::FromFloats(residual, {7, 96}, DType::kBF16)},
          {"empty", Tensor::Empty({0, 96}, DType::kF32)}};
}

HandoffExpectation Expect(uint64_t microbatch, uint64_t sequence, uint64_t epoch) {
  HandoffExpectation expected;
  expected.microbatch_id = microbatch;
  expected.sequence_number = sequence;
  expected.epoch = epoch;
  expected.tensors = {{"hidden", DType::kF32, {7, 96}}, {"residual", DType::kBF16, {7, 96}},
                      {"empty", DType::kF32, {0, 96}}};
  return expected;
}

SendScript SendOne(v1::StreamState header, Tensors tensors, HandoffSenderOptions options) {
  return [=](UcxWorker& worker, UcxEndpoint& endpoint, Channel&) {
    HandoffSender sender(worker, endpoint, options);
    return sender.Send(header, tensors, absl::Now() + absl::Seconds(10));
  };
}

void HandoffTest::StartSender(SendScript script, SendScript forger) {
  const UcxErrorMode mode = GetParam();
  // Both fork before this process makes its worker.
  peer_ = Fork(mode, std::move(script), "sender");
  if (forger) forger_ = Fork(mode, std::move(forger), "forger");
  ASSERT_TRUE(ConnectParent(peer_->channel(), mode, side_).ok());
  if (forger_ != nullptr) {
    // The forger connects to this worker; this side needs no endpoint to it.
    ASSERT_TRUE(forger_->channel().Read(absl::Seconds(10)).ok());
    ASSERT_TRUE(forger_->channel().Write(side_.worker->Address()).ok());
  }
}

void HandoffTest::FinishSender() {
  for (PeerProcess* child : {peer_.get(), forger_.get()}) {
    if (child == nullptr) continue;
    ASSERT_TRUE(child->channel().Write("done").ok());
    EXPECT_EQ(child->Wait(absl::Seconds(10), [&] { side_.worker->Progress(); }).value_or(-1), 0);
  }
}

HandoffReceiver HandoffTest::MakeReceiver(HandoffReceiverOptions options) {
  return HandoffReceiver(*side_.worker, &side_.endpoint, std::move(options));
}

absl::StatusOr<ReceivedHandoff> HandoffTest::Receive(const HandoffExpectation& expected,
                                                     HandoffReceiverOptions options) {
  HandoffReceiver receiver = MakeReceiver(std::move(options));
  return receiver.Receive(expected, absl::Now() + absl::Seconds(10));
}

absl::StatusOr<std::string> HandoffTest::ReadForger() {
  return forger_->channel().Read(absl::Seconds(10), [&] { side_.worker->Progress(); });
}

absl::Status HandoffTest::TellSender(const std::string& message) { return peer_->channel().Write(message); }

}  // namespace seam::handoff::testing

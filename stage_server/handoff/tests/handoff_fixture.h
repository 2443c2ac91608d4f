// Test support for the handoff protocol between real processes: the headers,
// tensors and expectations the tests share, and a fixture that forks the
// sender (and optionally a forger, a second process that sends to this one
// unasked) and receives here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "seam/handoff/handoff.h"
#include "tests/peer_process.h"

namespace seam::handoff::testing {

using Tensors = std::vector<std::pair<std::string, Tensor>>;

// A WRITTEN header with 7 tokens.
v1::StreamState Header(uint64_t microbatch, uint64_t sequence, uint64_t epoch);
// hidden f32 [7, hidden_cols], residual bf16 [7, 96], empty f32 [0, 96].
Tensors MakeTensors(int64_t hidden_cols = 96);
// What MakeTensors() sends, as the receiver expects it.
HandoffExpectation Expect(uint64_t microbatch, uint64_t sequence, uint64_t epoch);

// What a sending child does once connected.
using SendScript = std::function<absl::Status(UcxWorker&, UcxEndpoint&, Channel&)>;
SendScript SendOne(v1::StreamState header, Tensors tensors, HandoffSenderOptions options = {});

class HandoffTest : public ::testing::TestWithParam<UcxErrorMode> {
 protected:
  // Forks the sender (and the forger, when given), runs each script there
  // once connected, and connects this process to them.
  void StartSender(SendScript script, SendScript forger = nullptr);
  // Lets the children exit and expects each to have succeeded.
  void FinishSender();
  // A Receive on a receiver made for this call.
  absl::StatusOr<ReceivedHandoff> Receive(const HandoffExpectation& expected, HandoffReceiverOptions options = {});
  // A receiver watching the sender's endpoint.
  HandoffReceiver MakeReceiver(HandoffReceiverOptions options = {});
  // Reads one message from the forger while progressing this worker.
  absl::StatusOr<std::string> ReadForger();
  // Writes one message to the sender.
  absl::Status TellSender(const std::string& message);

  std::unique_ptr<PeerProcess> peer_;
  std::unique_ptr<PeerProcess> forger_;
  PeerSide side_;
};

}  // namespace seam::handoff::testing

// The data-plane links of a stage to its neighbours, each choosing how its
// payloads travel. OutgoingLink (to the next stage) offers a CUDA-IPC device
// link (stage_server/handoff/device_handoff.h) in its host headers when the
// stage computes on GPUs and keeps its handoffs there; once the next stage
// accepts, handoffs go GPU to GPU, and stay on the host path when it
// declines, when a handoff does not fit a slot, or after the device link
// failed. IncomingLink (from the previous stage) answers the offer it finds
// in a header (with the transport table of handoff_transport.h: accepted
// only on the same host, from another process, with every producer GPU
// reachable) and takes both kinds of headers from then on. Each link logs
// the transport it settles on; the stage reports it in StageStatus
// (handoff_in / handoff_out). Both run on the stage actor's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/handoff/device_handoff.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/v1/stage_service.pb.h"
#include "stage_handoff.h"

namespace seam::server {

struct HandoffLinkOptions {
  // Offer and accept device links (a CUDA stage with --handoff-transport auto).
  bool device = false;
  std::vector<int> devices;  // TP rank r's GPU
  // Bytes of each slot of the sender's ring per lane (the bound on one TP
  // rank's handoff, capped); two slots per lane.
  uint64_t slot_bytes = 0;
};

class OutgoingLink {
 public:
  OutgoingLink(handoff::UcxWorker& worker, handoff::UcxEndpoint& next, const v1::StageConfig& config,
               HandoffLinkOptions options);
  // Sends one framed handoff (tensors on the host, or on the ranks' GPUs).
  absl::Status Send(const OutgoingHandoff& framed, absl::Time deadline);
  v1::HandoffTransport transport() const;
  handoff::DeviceLinkDrops drops() const;

 private:
  // Settles the device link's state before a send; logs changes.
  void Settle();
  absl::Status SendOnHost(const OutgoingHandoff& framed, bool offer, absl::Time deadline);
  void Retire(const std::string& why);

  handoff::UcxWorker& worker_;
  handoff::UcxEndpoint& next_;
  v1::StageConfig config_;
  HandoffLinkOptions options_;
  std::unique_ptr<handoff::HandoffSender> host_sender_;   // the host path, made at its first handoff
  std::unique_ptr<handoff::DeviceHandoffSender> device_;  // null: host path only
  std::vector<std::unique_ptr<handoff::DeviceHandoffSender>> retired_;  // failed links, kept (a peer may still read)
  bool tried_ = false;     // a device link was created or refused
  bool accepted_ = false;  // logged as accepted
  handoff::DeviceLinkDrops retired_drops_;
};

class IncomingLink {
 public:
  // `previous` may be invalid (a test without a producer endpoint): then no offer is answered.
  IncomingLink(handoff::UcxWorker& worker, handoff::UcxEndpoint& previous, const v1::StageConfig& config,
               HandoffLinkOptions options, handoff::HandoffReceiverOptions receive);
  absl::StatusOr<handoff::ReceivedHandoff> Receive(const handoff::HandoffExpectation& expected,
                                                   absl::Time deadline);
  const handoff::HandoffDrops& drops() const { return receiver_.drops(); }
  // While the stage is idle (HandoffReceiver::Poll).
  void Poll(uint64_t answered_through) { receiver_.Poll(answered_through); }
  v1::HandoffTransport transport() const;

 private:
  void AnswerOffer(const v1::DeviceLinkOffer& offer, absl::Time deadline);

  handoff::UcxWorker& worker_;
  handoff::UcxEndpoint& previous_;
  v1::StageConfig config_;
  HandoffLinkOptions options_;
  handoff::HandoffReceiver receiver_;
  std::unique_ptr<handoff::DeviceHandoffReceiver> device_;
  std::string device_refused_;  // why no DeviceHandoffReceiver exists ("" while untried)
  uint64_t answered_link_ = 0;
};

}  // namespace seam::server

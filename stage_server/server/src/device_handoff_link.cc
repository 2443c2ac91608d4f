// The links of a stage to its neighbours and their transports (see device_handoff_link.h).
#include "device_handoff_link.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"

namespace seam::server {
namespace {

handoff::DeviceLinkOptions LinkOptions(const v1::StageConfig& config, const HandoffLinkOptions& options) {
  handoff::DeviceLinkOptions o;
  o.devices = options.devices;
  o.slot_bytes = options.slot_bytes;
  o.slots = 2;
  o.key = config.handoff_key();
  o.epoch = config.epoch();
  return o;
}

}  // namespace

OutgoingLink::OutgoingLink(handoff::UcxWorker& worker, handoff::UcxEndpoint& next, const v1::StageConfig& config,
                           HandoffLinkOptions options)
    : worker_(worker), next_(next), config_(config), options_(std::move(options)) {}

v1::HandoffTransport OutgoingLink::transport() const {
  return device_ != nullptr && device_->answer() == handoff::DeviceHandoffSender::Answer::kAccepted
             ? v1::HANDOFF_TRANSPORT_CUDA_IPC
             : v1::HANDOFF_TRANSPORT_HOST_UCX;
}

handoff::DeviceLinkDrops OutgoingLink::drops() const {
  handoff::DeviceLinkDrops d = retired_drops_;
  if (device_ != nullptr) {
    const handoff::DeviceLinkDrops now = device_->drops();
    d.bad_mac += now.bad_mac;
    d.malformed += now.malformed;
    d.stale += now.stale;
  }
  return d;
}

void OutgoingLink::Retire(const std::string& why) {
  SEAM_LOG_WARN("handoff link to pipeline rank {}: host_ucx from now on: {}", config_.pipeline_rank() + 1, why);
  const handoff::DeviceLinkDrops d = device_->drops();
  retired_drops_.bad_mac += d.bad_mac;
  retired_drops_.malformed += d.malformed;
  retired_drops_.stale += d.stale;
  retired_.push_back(std::move(device_));
}

void OutgoingLink::Settle() {
  if (!options_.device) return;
  const uint32_t to = config_.pipeline_rank() + 1;
  if (!tried_) {
    tried_ = true;
    absl::StatusOr<std::unique_ptr<handoff::DeviceHandoffSender>> made =
        handoff::DeviceHandoffSender::Create(worker_, next_, LinkOptions(config_, options_));
    if (!made.ok()) {
      SEAM_LOG_INFO("handoff link to pipeline rank {}: host_ucx (no device link: {})", to, made.status().ToString());
      return;
    }
    device_ = *std::move(made);
    SEAM_LOG_INFO("handoff link to pipeline rank {}: offering cuda_ipc ({} slots of {} bytes per lane)", to, 2,
                  options_.slot_bytes);
  }
  if (device_ == nullptr) return;
  device_->Poll();
  switch (device_->answer()) {
    case handoff::DeviceHandoffSender::Answer::kPending:
      return;
    case handoff::DeviceHandoffSender::Answer::kDeclined:
      SEAM_LOG_INFO("handoff link to pipeline rank {}: host_ucx (the next stage declined cuda_ipc: {})", to,
                    device_->answer_reason());
      device_.reset();
      return;
    case handoff::DeviceHandoffSender::Answer::kAccepted:
      if (!accepted_) SEAM_LOG_INFO("handoff link to pipeline rank {}: cuda_ipc", to);
      accepted_ = true;
      return;
  }
}

absl::Status OutgoingLink::Send(const OutgoingHandoff& framed, absl::Time deadline) {
  Settle();
  if (transport() == v1::HANDOFF_TRANSPORT_CUDA_IPC) {
    const absl::Status fits = device_->Fits(framed.tensors);
    if (fits.ok()) {
      const absl::Status sent = device_->Send(framed.header, framed.tensors, deadline);
      if (!sent.ok()) Retire(sent.ToString());
      return sent;
    }
    SEAM_LOG_DEBUG("microbatch {}: handoff on the host path: {}", framed.header.microbatch_id(), fits.ToString());
  }
  return SendOnHost(framed, device_ != nullptr && !accepted_, deadline);
}

absl::Status OutgoingLink::SendOnHost(const OutgoingHandoff& framed, bool offer, absl::Time deadline) {
  std::vector<std::pair<std::string, Tensor>> host;
  for (const auto& [name, t] : framed.tensors) {
    SEAM_ASSIGN_OR_RETURN(Tensor on_host, t.On(Device::CPU()));
    host.emplace_back(name, std::move(on_host));
  }
  v1::StreamState header = framed.header;
  if (offer) *header.mutable_device_offer() = device_->offer();
  if (host_sender_ == nullptr) {
    handoff::HandoffSenderOptions send;
    send.key = config_.handoff_key();
    host_sender_ = std::make_unique<handoff::HandoffSender>(worker_, next_, std::move(send));
  }
  return host_sender_->Send(header, host, deadline);
}

IncomingLink::IncomingLink(handoff::UcxWorker& worker, handoff::UcxEndpoint& previous, const v1::StageConfig& config,
                           HandoffLinkOptions options, handoff::HandoffReceiverOptions receive)
    : worker_(worker),
      previous_(previous),
      config_(config),
      options_(std::move(options)),
      receiver_(worker, previous.valid() ? &previous : nullptr, std::move(receive)) {}

v1::HandoffTransport IncomingLink::transport() const {
  return device_ != nullptr ? device_->transport() : v1::HANDOFF_TRANSPORT_HOST_UCX;
}

absl::StatusOr<handoff::ReceivedHandoff> IncomingLink::Receive(const handoff::HandoffExpectation& expected,
                                                               absl::Time deadline) {
  absl::StatusOr<handoff::ReceivedHandoff> got = receiver_.Receive(expected, deadline);
  if (got.ok() && got->header.has_device_offer() && got->header.device_offer().link_id() != answered_link_ &&
      previous_.valid()) {
    AnswerOffer(got->header.device_offer(), deadline);
  }
  return got;
}

void IncomingLink::AnswerOffer(const v1::DeviceLinkOffer& offer, absl::Time deadline) {
  const uint32_t from = config_.pipeline_rank() - 1;
  answered_link_ = offer.link_id();
  if (options_.device && device_ == nullptr && device_refused_.empty()) {
    absl::StatusOr<std::unique_ptr<handoff::DeviceHandoffReceiver>> made =
        handoff::DeviceHandoffReceiver::Create(worker_, previous_, LinkOptions(config_, options_));
    if (made.ok()) {
      device_ = *std::move(made);
    } else {
      device_refused_ = made.status().ToString();
    }
  }
  if (device_ == nullptr) {
    const std::string why =
        options_.device ? absl::StrCat("no device link here: ", device_refused_) : "this stage keeps handoffs on the host";
    v1::DeviceLinkReply reply;
    reply.set_link_id(offer.link_id());
    reply.set_epoch(config_.epoch());
    reply.mutable_answer()->set_accepted(false);
    reply.mutable_answer()->set_reason(why);
    const absl::Status sent =
        handoff::SendDeviceLinkReply(worker_, previous_, reply, config_.handoff_key(), deadline);
    SEAM_LOG_INFO("handoff link from pipeline rank {}: host_ucx ({}){}", from, why,
                  sent.ok() ? "" : absl::StrCat("; the answer was not sent: ", sent.ToString()));
    return;
  }
  absl::StatusOr<handoff::TransportChoice> choice = device_->Answer(offer, deadline);
  if (!choice.ok()) {
    SEAM_LOG_WARN("handoff link from pipeline rank {}: answering the device link offer: {}", from,
                  choice.status().ToString());
    return;
  }
  if (choice->transport == v1::HANDOFF_TRANSPORT_CUDA_IPC) receiver_.set_device_payloads(device_.get());
  SEAM_LOG_INFO("handoff link from pipeline rank {}: {}{}", from, handoff::TransportName(choice->transport),
                choice->passed_over.empty() ? "" : absl::StrCat(" (", choice->passed_over, ")"));
}

}  // namespace seam::server

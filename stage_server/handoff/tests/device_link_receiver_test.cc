// A HandoffReceiver meets device link traffic between real processes, without
// a GPU: a CUDA_IPC header on a receiver that took no device link is refused
// by name and the stream goes on; a header of an unknown transport likewise;
// an offer travels in a host header, and a consumer that cannot take it
// declines with a sealed reply the producer verifies.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/handoff/device_handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/device_link_reply.h"
#include "tests/handoff_fixture.h"

namespace seam::handoff {
namespace {

using ::testing::HasSubstr;
using testing::Channel;
using testing::Expect;
using testing::Header;
using testing::MakeTensors;
using testing::SendScript;

constexpr char kKey[] = "epoch 1 handoff key";

class DeviceLinkReceiverTest : public testing::HandoffTest {};

HandoffReceiverOptions Keyed() {
  HandoffReceiverOptions options;
  options.key = kKey;
  return options;
}

HandoffExpectation NoTensors(uint64_t microbatch) {
  HandoffExpectation e = Expect(microbatch, microbatch, 1);
  e.tensors.clear();
  return e;
}

// Sends microbatch 1's header with `transport` and no payloads, then a real
// host handoff of microbatch 2.
SendScript OddHeaderThenHost(v1::HandoffTransport transport) {
  return [transport](UcxWorker& worker, UcxEndpoint& endpoint, Channel&) -> absl::Status {
    HandoffSender sender(worker, endpoint, HandoffSenderOptions{kKey, nullptr});
    v1::StreamState odd = Header(1, 1, 1);
    odd.set_transport(transport);
    odd.mutable_device_slot()->set_link_id(99);
    SEAM_RETURN_IF_ERROR(sender.Send(odd, {}, absl::Now() + absl::Seconds(10)));
    return sender.Send(Header(2, 2, 1), MakeTensors(), absl::Now() + absl::Seconds(10));
  };
}

TEST_P(DeviceLinkReceiverTest, CudaIpcHeaderWithoutADeviceLinkIsRefusedAndTheStreamGoesOn) {
  StartSender(OddHeaderThenHost(v1::HANDOFF_TRANSPORT_CUDA_IPC));
  HandoffReceiver receiver = MakeReceiver(Keyed());
  auto refused = receiver.Receive(NoTensors(1), absl::Now() + absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("HANDOFF_TRANSPORT_CUDA_IPC, and this receiver took no device link"));
  auto next = receiver.Receive(Expect(2, 2, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->tensors.size(), 3u);
  EXPECT_EQ(receiver.drops().total(), 0u);
  FinishSender();
}

TEST_P(DeviceLinkReceiverTest, UnknownTransportIsRefusedAndTheStreamGoesOn) {
  StartSender(OddHeaderThenHost(static_cast<v1::HandoffTransport>(9)));
  HandoffReceiver receiver = MakeReceiver(Keyed());
  auto refused = receiver.Receive(NoTensors(1), absl::Now() + absl::Seconds(10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("unknown transport 9"));
  EXPECT_TRUE(receiver.Receive(Expect(2, 2, 1), absl::Now() + absl::Seconds(10)).ok());
  FinishSender();
}

// The producer's side of a declined offer: a host handoff carrying the
// offer, then the consumer's reply, which must verify and decline.
absl::Status OfferAndExpectDecline(UcxWorker& worker, UcxEndpoint& endpoint, Channel&) {
  HandoffSender sender(worker, endpoint, HandoffSenderOptions{kKey, nullptr});
  v1::StreamState header = Header(1, 1, 1);
  v1::DeviceLinkOffer* offer = header.mutable_device_offer();
  offer->set_link_id(0xABCD);
  offer->set_host_id(LocalHostId());
  offer->set_slot_bytes(4096);
  offer->add_lanes()->set_pci_bus_id("0000:19:00.0");
  SEAM_RETURN_IF_ERROR(sender.Send(header, MakeTensors(), absl::Now() + absl::Seconds(10)));
  SEAM_ASSIGN_OR_RETURN(const uint64_t link, LinkTagOf(kKey));
  SEAM_ASSIGN_OR_RETURN(std::vector<char> bytes,
                        worker.RecvUnknownSize(DeviceReplyTag(link), kTagKindAndLinkMask, kMaxReplyBytes,
                                               absl::Now() + absl::Seconds(10), &endpoint));
  SEAM_ASSIGN_OR_RETURN(const std::string key, ReplyKey(kKey));
  SEAM_ASSIGN_OR_RETURN(v1::DeviceLinkReply reply, CheckReply(absl::string_view(bytes.data(), bytes.size()), key));
  if (reply.link_id() != 0xABCD || reply.epoch() != 1 || !reply.has_answer() || reply.answer().accepted() ||
      reply.answer().reason().find("computes on the host") == std::string::npos) {
    return absl::InternalError(absl::StrCat("unexpected reply: ", reply.ShortDebugString()));
  }
  return absl::OkStatus();
}

TEST_P(DeviceLinkReceiverTest, OfferTravelsInAHostHeaderAndAHostStageDeclinesIt) {
  StartSender(OfferAndExpectDecline);
  HandoffReceiver receiver = MakeReceiver(Keyed());
  auto got = receiver.Receive(Expect(1, 1, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->header.has_device_offer());
  EXPECT_EQ(got->header.device_offer().link_id(), 0xABCDu);
  ConsumerFacts host_stage;  // what a stage computing on the host knows
  host_stage.cuda_ipc_built = true;  // a CUDA build, but no GPU lanes
  host_stage.host_id = LocalHostId();
  const TransportChoice choice = ChooseTransport(&got->header.device_offer(), host_stage);
  EXPECT_EQ(choice.transport, v1::HANDOFF_TRANSPORT_HOST_UCX);
  v1::DeviceLinkReply reply;
  reply.set_link_id(got->header.device_offer().link_id());
  reply.set_epoch(1);
  reply.mutable_answer()->set_accepted(false);
  reply.mutable_answer()->set_reason(choice.passed_over);
  ASSERT_TRUE(SendDeviceLinkReply(*side_.worker, side_.endpoint, reply, kKey, absl::Now() + absl::Seconds(10)).ok());
  FinishSender();
}

INSTANTIATE_TEST_SUITE_P(Modes, DeviceLinkReceiverTest, ::testing::Values(UcxErrorMode::kPeer, UcxErrorMode::kNone),
                         [](const auto& info) { return std::string(testing::ModeName(info.param)); });

}  // namespace
}  // namespace seam::handoff

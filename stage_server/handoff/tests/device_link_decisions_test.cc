// The decisions of device links that need no GPU: the transport table's
// choice, the sealing of replies, where tensors sit in a slot and what a
// header may claim about it, and the device checksum's reference.
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seam/handoff/device_checksum.h"
#include "seam/handoff/handoff_transport.h"
#include "src/device_link_reply.h"
#include "src/device_placement.h"
#include "src/handoff_header.h"

namespace seam::handoff {
namespace {

using ::testing::HasSubstr;

constexpr char kBusA[] = "0000:19:00.0";
constexpr char kBusB[] = "0000:3b:00.0";

v1::DeviceLinkOffer Offer(std::vector<std::string> buses, int slots = 2) {
  v1::DeviceLinkOffer offer;
  offer.set_link_id(0x1234);
  offer.set_host_id("boot/host");
  offer.set_pid(100);
  offer.set_slot_bytes(1 << 20);
  for (const std::string& bus : buses) {
    v1::DeviceLane* lane = offer.add_lanes();
    lane->set_pci_bus_id(bus);
    for (int s = 0; s < slots; ++s) {
      lane->add_slot_memory(std::string(64, 'm'));
      lane->add_slot_events(std::string(64, 'e'));
    }
  }
  return offer;
}

ConsumerFacts Facts(std::vector<std::set<std::string>> reachable) {
  ConsumerFacts facts;
  facts.cuda_ipc_built = true;
  facts.host_id = "boot/host";
  facts.pid = 200;
  facts.reachable = std::move(reachable);
  return facts;
}

TEST(TransportChoiceTest, SameHostWithPeerAccessTakesCudaIpc) {
  const v1::DeviceLinkOffer offer = Offer({kBusA});
  const TransportChoice choice = ChooseTransport(&offer, Facts({{kBusA, kBusB}}));
  EXPECT_EQ(choice.transport, v1::HANDOFF_TRANSPORT_CUDA_IPC);
  EXPECT_EQ(choice.passed_over, "");
}

TEST(TransportChoiceTest, OneGpuSharedByBothStagesTakesCudaIpc) {
  const v1::DeviceLinkOffer offer = Offer({kBusA});
  EXPECT_EQ(ChooseTransport(&offer, Facts({{kBusA}})).transport, v1::HANDOFF_TRANSPORT_CUDA_IPC);
}

// Each row of the fallback: the host path, and the reason the device row gave.
struct Declined {
  const char* name;
  std::function<void(v1::DeviceLinkOffer&, ConsumerFacts&)> change;
  const char* reason;
};

TEST(TransportChoiceTest, EveryReasonToDeclineFallsBackToTheHost) {
  const std::vector<Declined> cases = {
      {"other host", [](auto& o, auto&) { o.set_host_id("boot2/other"); }, "another host"},
      {"no host id", [](auto& o, auto&) { o.clear_host_id(); }, "another host"},
      {"same process", [](auto& o, auto& f) { f.pid = o.pid(); }, "is this process"},
      {"no CUDA build", [](auto&, auto& f) { f.cuda_ipc_built = false; }, "no CUDA path"},
      {"host stage", [](auto&, auto& f) { f.reachable.clear(); }, "computes on the host"},
      {"unreachable GPU", [](auto&, auto& f) { f.reachable = {{kBusB}}; }, "no peer access"},
      {"lane count", [](auto&, auto& f) { f.reachable = {{kBusA}, {kBusA}}; }, "offers 1 lanes, this stage has 2"},
      {"one slot", [](auto& o, auto&) { o = Offer({kBusA}, 1); }, "at least 2"},
      {"empty slots", [](auto& o, auto&) { o.set_slot_bytes(0); }, "hold no bytes"},
      {"missing event", [](auto& o, auto&) { o.mutable_lanes(0)->mutable_slot_events()->RemoveLast(); },
       "1 events for 2 slots"},
  };
  for (const Declined& c : cases) {
    v1::DeviceLinkOffer offer = Offer({kBusA});
    ConsumerFacts facts = Facts({{kBusA}});
    c.change(offer, facts);
    const TransportChoice choice = ChooseTransport(&offer, facts);
    EXPECT_EQ(choice.transport, v1::HANDOFF_TRANSPORT_HOST_UCX) << c.name;
    EXPECT_THAT(choice.passed_over, HasSubstr("cuda_ipc: ")) << c.name;
    EXPECT_THAT(choice.passed_over, HasSubstr(c.reason)) << c.name;
  }
}

TEST(TransportChoiceTest, NoOfferStaysOnTheHost) {
  const TransportChoice choice = ChooseTransport(nullptr, Facts({{kBusA}}));
  EXPECT_EQ(choice.transport, v1::HANDOFF_TRANSPORT_HOST_UCX);
  EXPECT_EQ(choice.passed_over, "cuda_ipc: the producer offers no device link");
}

TEST(TransportChoiceTest, TableEndsWithARowThatAlwaysConnects) {
  const auto table = TransportTable();
  ASSERT_GE(table.size(), 2u);
  EXPECT_EQ(table.front().transport, v1::HANDOFF_TRANSPORT_CUDA_IPC);
  EXPECT_EQ(table.back().transport, v1::HANDOFF_TRANSPORT_HOST_UCX);
  EXPECT_TRUE(table.back().can_connect(nullptr, ConsumerFacts{}).ok());
  EXPECT_STREQ(TransportName(v1::HANDOFF_TRANSPORT_CUDA_IPC), "cuda_ipc");
  EXPECT_STREQ(TransportName(v1::HANDOFF_TRANSPORT_HOST_UCX), "host_ucx");
  EXPECT_STREQ(TransportName(v1::HANDOFF_TRANSPORT_UNSPECIFIED), "none");
}

v1::DeviceLinkReply Release(uint32_t slot, uint64_t index) {
  v1::DeviceLinkReply reply;
  reply.set_link_id(0x1234);
  reply.set_epoch(3);
  reply.mutable_release()->set_slot(slot);
  reply.mutable_release()->set_index(index);
  return reply;
}

TEST(DeviceLinkReplyTest, SealedReplyChecksUnderItsKey) {
  const std::string key = ReplyKey("epoch key").value();
  EXPECT_EQ(key.size(), 32u);
  const std::string wire = SealReply(Release(1, 5), key).value();
  auto got = CheckReply(wire, key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->release().slot(), 1u);
  EXPECT_EQ(got->release().index(), 5u);
  EXPECT_TRUE(got->mac().empty());
}

TEST(DeviceLinkReplyTest, ForgedRepliesAreRefusedWithTheirReason) {
  const std::string key = ReplyKey("epoch key").value();
  const std::string other = ReplyKey("another epoch").value();
  EXPECT_EQ(CheckReply(SealReply(Release(1, 5), other).value(), key).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckReply(SealReply(Release(1, 5), "").value(), key).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Sealed under the handoff key itself (as a header is): not a reply.
  EXPECT_EQ(CheckReply(SealReply(Release(1, 5), "epoch key").value(), key).status().code(),
            absl::StatusCode::kPermissionDenied);
  std::string flipped = SealReply(Release(1, 5), key).value();
  flipped[3] ^= 1;
  EXPECT_EQ(CheckReply(flipped, key).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckReply(std::string(kMaxReplyBytes + 1, 'x'), key).status().code(), absl::StatusCode::kOutOfRange);
  v1::DeviceLinkReply empty;
  empty.set_link_id(0x1234);
  auto neither = CheckReply(SealReply(empty, key).value(), key);
  EXPECT_EQ(neither.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(neither.status().message(), HasSubstr("neither an answer nor a release"));
}

TEST(DeviceLinkReplyTest, AReplyNeverVerifiesAsAHeader) {
  const std::string wire = SealReply(Release(1, 5), ReplyKey("epoch key").value()).value();
  EXPECT_EQ(CheckHeaderBytes(wire, "epoch key", HeaderLimits{}).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(SlotPlacementTest, HostTensorsDoNotFitADeviceLink) {
  const std::vector<std::pair<std::string, Tensor>> tensors = {{"r0.hidden", Tensor::Zeros({2, 8}, DType::kBF16)}};
  auto placed = PlaceInSlots(tensors, {0}, 4096);
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(placed.status().message(), HasSubstr("'r0.hidden' is not on a GPU"));
  EXPECT_EQ(PlaceInSlots({{"", Tensor()}}, {0}, 4096).status().code(), absl::StatusCode::kInvalidArgument);
}

v1::StreamState DeviceHeader() {
  v1::StreamState h;
  h.set_transport(v1::HANDOFF_TRANSPORT_CUDA_IPC);
  h.mutable_device_slot()->set_slot(1);
  for (int lane = 0; lane < 2; ++lane) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{512}}) {
      v1::TensorDesc* t = h.add_tensors();
      t->set_name(absl::StrCat("r", lane, offset == 0 ? ".hidden" : ".residual"));
      t->set_byte_size(300);
      t->set_lane(static_cast<uint32_t>(lane));
      t->set_offset(offset);
    }
  }
  return h;
}

TEST(SlotPlacementTest, HeaderClaimsAreCheckedBeforeAnyRead) {
  EXPECT_TRUE(CheckSlotPlacement(DeviceHeader(), 2, 2, 1024).ok());
  struct Case {
    std::function<void(v1::StreamState&)> change;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](auto& h) { h.mutable_tensors(1)->set_lane(2); }, "lane 2 of 2"},
      {[](auto& h) { h.mutable_tensors(1)->set_offset(100); }, "not 256-byte aligned"},
      {[](auto& h) { h.mutable_tensors(1)->set_byte_size(513); }, "pass the slot's 1024"},
      {[](auto& h) { h.mutable_tensors(1)->set_offset(~uint64_t{0} << 8); }, "pass the slot's 1024"},
      {[](auto& h) { h.mutable_tensors(1)->set_byte_size(~uint64_t{0}); }, "pass the slot's 1024"},
      {[](auto& h) { h.mutable_device_slot()->set_slot(2); }, "device_slot.slot: 2 of 2"},
      {[](auto& h) {
         for (int i = 0; i < kMaxTensorsPerLane; ++i) *h.add_tensors() = h.tensors(0);
       },
       "more than 8 tensors on lane 0"},
  };
  for (const Case& c : cases) {
    v1::StreamState h = DeviceHeader();
    c.change(h);
    const absl::Status s = CheckSlotPlacement(h, 2, 2, 1024);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

uint64_t Sum(uint64_t seed, const std::vector<unsigned char>& bytes) {
  return DeviceChecksum(seed, {{bytes.data(), bytes.size(), 0}});
}

std::vector<unsigned char> Pattern(size_t n) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
  return bytes;
}

TEST(DeviceChecksumTest, EveryChangedByteIsDetected) {
  const std::vector<unsigned char> bytes = Pattern(258);
  const uint64_t sum = Sum(42, bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char flip : {0x01, 0x80, 0xFF}) {
      std::vector<unsigned char> changed = bytes;
      changed[i] ^= flip;
      EXPECT_NE(Sum(42, changed), sum) << "byte " << i << " ^ " << int{flip};
    }
  }
}

TEST(DeviceChecksumTest, SwappedWordsAndOtherSeedsDiffer) {
  std::vector<unsigned char> bytes = Pattern(64);
  const uint64_t sum = Sum(42, bytes);
  EXPECT_NE(Sum(43, bytes), sum);
  std::vector<unsigned char> swapped = bytes;
  std::memcpy(swapped.data(), bytes.data() + 4, 4);
  std::memcpy(swapped.data() + 4, bytes.data(), 4);
  EXPECT_NE(Sum(42, swapped), sum);
  EXPECT_LT(sum, (uint64_t{1} << 61) - 1);
}

TEST(DeviceChecksumTest, SpansAtTheirWordPositionsSumAsOnePayload) {
  // What a lane's tensors at slot offsets 0 and 256 give equals one buffer
  // holding both there (the padding between them zero).
  const std::vector<unsigned char> a = Pattern(200), b = Pattern(96);
  std::vector<unsigned char> whole(256 + 96, 0);
  std::memcpy(whole.data(), a.data(), a.size());
  std::memcpy(whole.data() + 256, b.data(), b.size());
  const uint64_t split = DeviceChecksum(7, {{b.data(), b.size(), 64}, {a.data(), a.size(), 0}});
  EXPECT_EQ(split, Sum(7, whole));
  // A partial last word reads as zero-padded (byte counts are the descriptor's to check).
  std::vector<unsigned char> five = Pattern(5), eight = five;
  eight.resize(8, 0);
  EXPECT_EQ(Sum(7, five), Sum(7, eight));
  EXPECT_EQ(DeviceChecksum(7, {}), 0u);
}

}  // namespace
}  // namespace seam::handoff

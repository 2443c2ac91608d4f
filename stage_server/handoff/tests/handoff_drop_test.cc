// Headers a HandoffReceiver must drop, count and wait past, between real
// processes in both UCX modes: from endpoints without the epoch's key (other
// key, no key, garbage: strays under another link tag), forged under the
// link's own tag (no MAC, a MAC of another key), a header claiming 64 GiB,
// a header of another microbatch, one listing more payload than the bound.
// None shifts the stream: the real handoff still arrives, or the wait ends
// at its deadline naming what it dropped.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/handoff/handoff_tag.h"
#include "tests/handoff_fixture.h"

namespace seam::handoff {
namespace {

using ::testing::HasSubstr;
using testing::Channel;
using testing::Expect;
using testing::Header;
using testing::MakeTensors;
using testing::SendOne;
using testing::SendScript;

constexpr char kKey[] = "epoch 1 handoff key";

class HandoffDropTest : public testing::HandoffTest {};

HandoffSenderOptions Keyed(const std::string& key = kKey) {
  HandoffSenderOptions options;
  options.key = key;
  return options;
}
HandoffReceiverOptions KeyedReceiver(const std::string& key = kKey) {
  HandoffReceiverOptions options;
  options.key = key;
  return options;
}
uint64_t Link(const std::string& key = kKey) { return LinkTagOf(key).value(); }

// Waits for "go" from the test, then sends the real handoff of microbatch 7.
SendScript SendOnGo(HandoffSenderOptions options) {
  return [options](UcxWorker& worker, UcxEndpoint& endpoint, Channel& channel) -> absl::Status {
    SEAM_RETURN_IF_ERROR(channel.Read(absl::Seconds(10), [&] { worker.Progress(); }).status());
    HandoffSender sender(worker, endpoint, options);
    return sender.Send(Header(7, 0, 1), MakeTensors(), absl::Now() + absl::Seconds(10));
  };
}

TEST_P(HandoffDropTest, KeyedHandoffArrivesVerifiedWithNothingDropped) {
  StartSender(SendOne(Header(7, 0, 1), MakeTensors(), Keyed()));
  HandoffReceiver receiver = MakeReceiver(KeyedReceiver());
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->header.mac().empty());
  EXPECT_EQ(got->header.payload_nonce().size(), 12u);
  for (const v1::TensorDesc& desc : got->header.tensors()) EXPECT_EQ(desc.mac().size(), 16u) << desc.name();
  EXPECT_EQ(got->tensors.size(), 3u);
  EXPECT_EQ(receiver.drops().total(), 0u);
  FinishSender();
}

TEST_P(HandoffDropTest, HeaderClaiming64GiBIsDroppedUnallocatedAndTheRealHandoffArrives) {
  StartSender([](UcxWorker& worker, UcxEndpoint& endpoint, Channel&) -> absl::Status {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    SEAM_RETURN_IF_ERROR(
        testing::SendUnbackedClaim(worker, endpoint, HeaderTag(Link()), size_t{64} << 30, deadline));
    HandoffSender sender(worker, endpoint, Keyed());
    return sender.Send(Header(7, 0, 1), MakeTensors(), deadline);
  });
  HandoffReceiver receiver = MakeReceiver(KeyedReceiver());
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(receiver.drops().oversized, 1u);
  EXPECT_EQ(receiver.drops().total(), 1u);
  FinishSender();
}

TEST_P(HandoffDropTest, HeadersFromEndpointsWithoutTheKeyAreStraysAndTheRealHandoffStillArrives) {
  StartSender(SendOnGo(Keyed()), [](UcxWorker& worker, UcxEndpoint& endpoint, Channel& channel) -> absl::Status {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    HandoffSender other_key(worker, endpoint, Keyed("another epoch's key"));
    SEAM_RETURN_IF_ERROR(other_key.Send(Header(7, 0, 1), {}, deadline));
    HandoffSender no_key(worker, endpoint);
    SEAM_RETURN_IF_ERROR(no_key.Send(Header(7, 0, 1), {}, deadline));
    const std::string garbage(64, '\xff');
    // The tag layout of old, with the microbatch id where the link tag is.
    SEAM_RETURN_IF_ERROR(
        worker.Send(endpoint, HandoffTag(HandoffKind::kHeader, 7, 0), garbage.data(), garbage.size(), deadline));
    return channel.Write("sent");
  });
  ASSERT_TRUE(ReadForger().ok());
  HandoffReceiver receiver = MakeReceiver(KeyedReceiver());
  // The forger's three headers arrive before the sender sends anything.
  auto early = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Milliseconds(800));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded) << early.status();
  EXPECT_THAT(early.status().message(),
              HasSubstr("dropped 3 message(s) meanwhile; last: a message from outside the link (a stray)"));
  EXPECT_EQ(receiver.drops().unknown_peer, 3u);

  ASSERT_TRUE(TellSender("go").ok());
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tensors.size(), 3u);
  EXPECT_EQ(receiver.drops().unknown_peer, 3u);
  EXPECT_EQ(receiver.drops().total(), 3u);
  FinishSender();
}

TEST_P(HandoffDropTest, HeadersForgedUnderTheLinkTagFailTheirMacAndTheRealHandoffStillArrives) {
  // A forger that learned the link tag (it reads the wire) but has no key.
  StartSender(SendOnGo(Keyed()), [](UcxWorker& worker, UcxEndpoint& endpoint, Channel& channel) -> absl::Status {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    v1::StreamState header = Header(7, 0, 1);
    const std::string unsealed = header.SerializeAsString();
    SEAM_RETURN_IF_ERROR(worker.Send(endpoint, HeaderTag(Link()), unsealed.data(), unsealed.size(), deadline));
    const std::string garbage(64, '\xff');
    SEAM_RETURN_IF_ERROR(worker.Send(endpoint, HeaderTag(Link()), garbage.data(), garbage.size(), deadline));
    return channel.Write("sent");
  });
  ASSERT_TRUE(ReadForger().ok());
  HandoffReceiver receiver = MakeReceiver(KeyedReceiver());
  auto early = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Milliseconds(800));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded) << early.status();
  EXPECT_THAT(early.status().message(), HasSubstr("dropped 2 message(s) meanwhile; last: header of 64 bytes carries no MAC"));
  EXPECT_EQ(receiver.drops().bad_mac, 2u);
  ASSERT_TRUE(TellSender("go").ok());
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(receiver.drops().total(), 2u);
  FinishSender();
}

TEST_P(HandoffDropTest, GarbageUnderTheLinkTagIsDroppedAsMalformedWithoutAKey) {
  StartSender(SendOnGo({}), [](UcxWorker& worker, UcxEndpoint& endpoint, Channel& channel) -> absl::Status {
    const std::string garbage(64, '\xff');
    SEAM_RETURN_IF_ERROR(
        worker.Send(endpoint, HeaderTag(0), garbage.data(), garbage.size(), absl::Now() + absl::Seconds(10)));
    return channel.Write("sent");
  });
  ASSERT_TRUE(ReadForger().ok());
  ASSERT_TRUE(TellSender("go").ok());
  HandoffReceiver receiver = MakeReceiver();
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(receiver.drops().malformed, 1u);
  EXPECT_EQ(receiver.drops().total(), 1u);
  FinishSender();
}

TEST_P(HandoffDropTest, AHandoffUnderAnotherEpochsKeyIsAStrayUntilTheDeadline) {
  StartSender(SendOne(Header(7, 0, 1), MakeTensors(), Keyed("epoch 0 handoff key")));
  HandoffReceiver receiver = MakeReceiver(KeyedReceiver());
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Milliseconds(800));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("a message from outside the link (a stray)"));
  EXPECT_EQ(receiver.drops().unknown_peer, 4u);  // its header and three payloads
  EXPECT_EQ(receiver.drops().total(), 4u);
  FinishSender();
}

TEST_P(HandoffDropTest, HeaderOfAnotherMicrobatchIsDroppedAndTheExpectedOneStillArrives) {
  StartSender([](UcxWorker& worker, UcxEndpoint& endpoint, Channel&) -> absl::Status {
    HandoffSender sender(worker, endpoint, Keyed());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    SEAM_RETURN_IF_ERROR(sender.Send(Header(9, 0, 1), MakeTensors(), deadline));
    return sender.Send(Header(7, 0, 1), MakeTensors(), deadline);
  });
  HandoffReceiver receiver = MakeReceiver(KeyedReceiver());
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(receiver.drops().unexpected_microbatch, 1u);
  EXPECT_EQ(receiver.drops().total(), 1u);
  FinishSender();
}

TEST_P(HandoffDropTest, OnlyAnotherMicrobatchEndsTheWaitAtTheDeadlineNamingIt) {
  StartSender(SendOne(Header(9, 0, 1), MakeTensors()));
  HandoffReceiver receiver = MakeReceiver();
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Milliseconds(800));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("handoff for microbatch 7: header (dropped 1 message(s) meanwhile; "
                                                "last: header of microbatch 9 while expecting 7)"));
  EXPECT_EQ(receiver.drops().unexpected_microbatch, 1u);
  FinishSender();
}

TEST_P(HandoffDropTest, HeaderListingMoreThanMaxPayloadBytesIsDroppedAsOversized) {
  StartSender(SendOne(Header(7, 0, 1), MakeTensors(), Keyed()));
  HandoffReceiverOptions bounded = KeyedReceiver();
  bounded.max_payload_bytes = 3000;  // hidden alone is 2688 bytes, residual 1344 more
  HandoffReceiver receiver = MakeReceiver(bounded);
  auto got = receiver.Receive(Expect(7, 0, 1), absl::Now() + absl::Milliseconds(800));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(got.status().message(),
              HasSubstr("tensors up to 'residual' take more than 3000 bytes (max_payload_bytes)"));
  EXPECT_EQ(receiver.drops().oversized, 1u);
  EXPECT_EQ(receiver.drops().total(), 1u);
  FinishSender();
}

INSTANTIATE_TEST_SUITE_P(Modes, HandoffDropTest, ::testing::Values(UcxErrorMode::kPeer, UcxErrorMode::kNone),
                         [](const auto& info) { return std::string(testing::ModeName(info.param)); });

}  // namespace
}  // namespace seam::handoff

// The handoff protocol between two real processes over UCX, in both modes:
// a verified handoff, and each rejection of the expected microbatch's header
// with its code and the field named (dropped messages: handoff_drop_test.cc).
#include "seam/handoff/handoff.h"

#include <chrono>
#include <cstring>
#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "tests/handoff_fixture.h"

namespace seam::handoff {
namespace {

using ::testing::HasSubstr;
using testing::Channel;
using testing::Expect;
using testing::Header;
using testing::HandoffTest;
using testing::MakeTensors;
using testing::SendOne;
using testing::Tensors;

constexpr absl::Duration kSlack = absl::Milliseconds(500);

TEST_P(HandoffTest, TensorsArriveVerifiedWithTheirHeader) {
  StartSender(SendOne(Header(7, 3, 2), MakeTensors()));
  auto got = Receive(Expect(7, 3, 2));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->header.microbatch_id(), 7u);
  EXPECT_EQ(got->header.token_count(), 7u);
  ASSERT_EQ(got->header.tensors_size(), 3);
  EXPECT_EQ(got->header.tensors(1).name(), "residual");
  EXPECT_EQ(got->header.tensors(1).byte_size(), 7u * 96 * 2);
  const Tensors sent = MakeTensors();
  ASSERT_EQ(got->tensors.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    const Tensor& want = sent[i].second;
    const Tensor& have = got->tensors[i];
    EXPECT_EQ(have.dtype(), want.dtype()) << sent[i].first;
    EXPECT_EQ(have.shape(), want.shape()) << sent[i].first;
    ASSERT_EQ(have.nbytes(), want.nbytes());
    if (want.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(have.raw_data(), want.raw_data(), want.nbytes()), 0) << sent[i].first;
    }
  }
  FinishSender();
}

TEST_P(HandoffTest, PayloadAlteredAfterChecksumIsDataLoss) {
  HandoffSenderOptions corrupt;
  corrupt.after_checksum = [](size_t index, std::vector<char>& payload) {
    if (index == 1) payload[5] ^= 0x10;
  };
  StartSender(SendOne(Header(7, 0, 1), MakeTensors(), corrupt));
  auto got = Receive(Expect(7, 0, 1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("tensor 'residual' of microbatch 7: crc32c 0x"));
  EXPECT_THAT(got.status().message(), HasSubstr(" != header 0x"));
  FinishSender();
}

TEST_P(HandoffTest, StaleEpochIsRejectedAndTheNextHandoffStillArrives) {
  StartSender([](UcxWorker& worker, UcxEndpoint& endpoint, Channel&) -> absl::Status {
    HandoffSender sender(worker, endpoint);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    SEAM_RETURN_IF_ERROR(sender.Send(Header(7, 0, 1), MakeTensors(), deadline));
    return sender.Send(Header(8, 1, 2), MakeTensors(), deadline);
  });
  auto stale = Receive(Expect(7, 0, 2));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  EXPECT_THAT(stale.status().message(), HasSubstr("microbatch 7: epoch: expected 2, got 1"));
  auto next = Receive(Expect(8, 1, 2));
  EXPECT_TRUE(next.ok()) << next.status();
  FinishSender();
}

TEST_P(HandoffTest, WrongSequenceNumberIsFailedPrecondition) {
  StartSender(SendOne(Header(7, 4, 1), MakeTensors()));
  auto got = Receive(Expect(7, 5, 1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("microbatch 7: sequence_number: expected 5, got 4"));
  FinishSender();
}

TEST_P(HandoffTest, WrongShapeIsInvalidArgumentNamingTheTensor) {
  StartSender(SendOne(Header(7, 0, 1), MakeTensors(/*hidden_cols=*/95)));
  auto got = Receive(Expect(7, 0, 1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("tensor 'hidden' shape: expected [7, 96], got [7, 95]"));
  FinishSender();
}

TEST_P(HandoffTest, ValidatorReplacesTheTensorListCheck) {
  StartSender(SendOne(Header(7, 0, 1), MakeTensors()));
  HandoffExpectation expected = Expect(7, 0, 1);
  expected.tensors.clear();
  expected.validator = [](const v1::StreamState& header) {
    return header.token_count() == 8 ? absl::OkStatus()
                                     : absl::InvalidArgumentError("token_count: expected 8, got 7");
  };
  auto got = Receive(expected);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("microbatch 7: token_count: expected 8, got 7"));
  FinishSender();
}

TEST_P(HandoffTest, SenderKilledMidStreamEndsTheReceiveWithinItsDeadline) {
  StartSender([](UcxWorker& worker, UcxEndpoint& endpoint, Channel& channel) {
    HandoffSenderOptions stall;
    // Header and tensor 0 go out; before tensor 1 the sender reports and
    // spins until this process kills it.
    stall.after_checksum = [&](size_t index, std::vector<char>&) {
      if (index != 1) return;
      (void)channel.Write("stalled");
      for (;;) worker.Progress();
    };
    HandoffSender sender(worker, endpoint, stall);
    return sender.Send(Header(7, 0, 1), MakeTensors(), absl::Now() + absl::Seconds(10));
  });
  ASSERT_TRUE(peer_->channel().Read(absl::Seconds(10), [&] { side_.worker->Progress(); }).ok());
  peer_->Kill();
  const absl::Duration budget = absl::Seconds(2);
  const absl::Time start = absl::Now();
  HandoffReceiver receiver(*side_.worker, &side_.endpoint);
  auto got = receiver.Receive(Expect(7, 0, 1), start + budget);
  const absl::Duration waited = absl::Now() - start;
  EXPECT_THAT(got.status().code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
      << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("tensor 'residual' of microbatch 7"));
  EXPECT_LT(waited, budget + kSlack);
  std::printf("%s: receive from killed sender after %s: %s\n", testing::ModeName(GetParam()),
              absl::FormatDuration(waited).c_str(), got.status().ToString().c_str());
}

// A sender that stops between a header and its payload (killed after its
// header went out, or stopped) must not hold the receiver to its deadline
// once the stage reloads: the interruption ends the wait for the payload as
// it ends the wait for a header. The receiver watches no endpoint, as the
// first stage's receiver of multi-step tokens does; before the payload wait
// polled the interruption, this waited the whole 10 s.
TEST_P(HandoffTest, AnInterruptionEndsTheWaitForAPayloadThatNeverComes) {
  StartSender([](UcxWorker& worker, UcxEndpoint& endpoint, Channel& channel) {
    HandoffSenderOptions stall;
    stall.after_checksum = [&](size_t index, std::vector<char>&) {
      if (index != 0) return;  // the header is out, no payload follows
      (void)channel.Write("stalled");
      for (;;) worker.Progress();
    };
    HandoffSender sender(worker, endpoint, stall);
    return sender.Send(Header(7, 0, 1), MakeTensors(), absl::Now() + absl::Seconds(10));
  });
  ASSERT_TRUE(peer_->channel().Read(absl::Seconds(10), [&] { side_.worker->Progress(); }).ok());
  HandoffReceiver receiver(*side_.worker, nullptr);
  HandoffExpectation expected = Expect(7, 0, 1);
  const absl::Time start = absl::Now();
  const absl::Duration cut_after = absl::Milliseconds(300);
  int polls = 0;
  expected.interrupted = [&]() -> absl::Status {
    ++polls;
    if (absl::Now() - start < cut_after) return absl::OkStatus();
    return absl::UnavailableError("the stage reloads for a new epoch");
  };
  auto got = receiver.Receive(expected, start + absl::Seconds(10));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("tensor 'hidden' of microbatch 7"));
  EXPECT_THAT(got.status().message(), HasSubstr("reloads for a new epoch"));
  EXPECT_GE(waited, cut_after);
  // Polled every drain_interval (20 ms): the cut comes one interval after
  // cut_after, plus scheduling on a loaded machine.
  EXPECT_LT(waited, cut_after + kSlack);
  EXPECT_GE(polls, 2);
  peer_->Kill();
}

INSTANTIATE_TEST_SUITE_P(Modes, HandoffTest, ::testing::Values(UcxErrorMode::kPeer, UcxErrorMode::kNone),
                         [](const auto& info) { return std::string(testing::ModeName(info.param)); });

TEST(HandoffReceiverTest, NoSenderIsDeadlineExceededWithinTheDeadline) {
  auto worker = UcxWorker::Create(testing::ModeOptions(UcxErrorMode::kPeer));
  ASSERT_TRUE(worker.ok()) << worker.status();
  HandoffReceiver receiver(**worker);
  const absl::Time start = absl::Now();
  auto got = receiver.Receive(Expect(7, 0, 1), start + absl::Milliseconds(300));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("handoff for microbatch 7: header"));
  EXPECT_GE(waited, absl::Milliseconds(300));
  EXPECT_LT(waited, absl::Milliseconds(300) + kSlack);
}

TEST(HandoffSenderTest, RefusesAHeaderThatAlreadyListsTensorsAndDuplicateNames) {
  auto worker = UcxWorker::Create(testing::ModeOptions(UcxErrorMode::kPeer));
  ASSERT_TRUE(worker.ok()) << worker.status();
  UcxEndpoint unconnected;
  HandoffSender sender(**worker, unconnected);
  v1::StreamState listed = Header(7, 0, 1);
  listed.add_tensors()->set_name("hidden");
  EXPECT_EQ(sender.Send(listed, MakeTensors(), absl::Now() + absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
  Tensors twice = MakeTensors();
  twice[1].first = "hidden";
  const absl::Status status = sender.Send(Header(7, 0, 1), twice, absl::Now() + absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'hidden' appears twice"));
}

}  // namespace
}  // namespace seam::handoff

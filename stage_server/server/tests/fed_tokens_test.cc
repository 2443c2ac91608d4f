// Decode steps fed on the stage the token it chose in the microbatch before
// (SequenceEntry.feed_previous_token; the coordinator's overlap_steps), on a
// real seam-stage: the fed tokens equal the explicit ones of an in-process
// reference; a fed entry with no token chosen before fails alone (ABORTED)
// while its microbatch's other sequences run; malformed fed entries are
// refused by field.
#include <gtest/gtest.h>

#include <vector>

#include "seam/runtime/stage_group.h"
#include "stage_fixtures.h"
#include "stage_process.h"

namespace seam::server {
namespace {

using namespace testing;  // NOLINT: the fixtures of these tests

void AddFed(v1::MicrobatchDescriptor& d, uint64_t sequence, uint64_t start) {
  AddSequence(d, sequence, {}, start, false);
  d.mutable_sequences(d.sequences_size() - 1)->set_feed_previous_token(true);
}

TEST(FedTokens, AFedStepTakesTheTokenTheStageChoseAndOneWithoutFailsAlone) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  EXPECT_TRUE(GetStatus(stage).feeds_previous_token()) << "a coordinator overlaps steps only where a stage says so";
  const std::vector<int32_t> a = {3, 14, 15, 92, 65}, b = {35, 89, 79};
  RunClient run(stage);
  v1::MicrobatchDescriptor prefill = Descriptor(1, 1);
  AddSequence(prefill, 1, a, 0, true);
  AddSequence(prefill, 2, b, 0, true);
  const v1::MicrobatchResult first = run.Exchange(prefill);
  ASSERT_FALSE(first.has_error()) << first.error().message();

  // Sequence 1 fed, sequence 3 (never sampled here) fed: it fails alone.
  v1::MicrobatchDescriptor decode = Descriptor(2, 2);
  AddFed(decode, 1, a.size());
  AddFed(decode, 3, 0);
  const v1::MicrobatchResult second = run.Exchange(decode);
  ASSERT_FALSE(second.has_error()) << second.error().message();
  ASSERT_EQ(second.sequences_size(), 2);
  std::vector<int32_t> fed_tokens;
  for (const v1::SequenceResult& r : second.sequences()) {
    if (r.sequence_id() == 3) {
      ASSERT_TRUE(r.has_error());
      EXPECT_EQ(r.error().code(), static_cast<int>(absl::StatusCode::kAborted));
      EXPECT_NE(r.error().message().find("feed_previous_token"), std::string::npos) << r.error().message();
    } else {
      ASSERT_TRUE(r.has_sampled_token()) << r.DebugString();
      fed_tokens.push_back(r.sampled_token());
    }
  }
  // A token is fed once: sequence 1's next step from the second microbatch's choice.
  v1::MicrobatchDescriptor third = Descriptor(3, 3);
  AddFed(third, 1, a.size() + 1);
  const v1::MicrobatchResult again = run.Exchange(third);
  ASSERT_FALSE(again.has_error()) << again.error().message();
  fed_tokens.push_back(SampledTokens(again).at(0));

  // Malformed: a fed entry with tokens; a fed prefill.
  v1::MicrobatchDescriptor with_tokens = Descriptor(4, 4);
  AddSequence(with_tokens, 1, {5}, a.size() + 2, false);
  with_tokens.mutable_sequences(0)->set_feed_previous_token(true);
  ExpectError(run.Exchange(with_tokens), absl::StatusCode::kInvalidArgument, "feed_previous_token");
  EXPECT_TRUE(run.Close().ok());

  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> group =
      runtime::StageGroup::Create(CheckpointDir(), 1, 1, boundary::ReductionPolicy::kAuto);
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<int32_t> p = ReferenceArgmax(**group, {{1, a, 0}, {2, b, 0}});
  const int64_t at = static_cast<int64_t>(a.size());
  const std::vector<int32_t> d1 = ReferenceArgmax(**group, {{1, {p[0]}, at}});
  const std::vector<int32_t> d2 = ReferenceArgmax(**group, {{1, {d1[0]}, at + 1}});
  EXPECT_EQ(fed_tokens, (std::vector<int32_t>{d1[0], d2[0]}));
}

}  // namespace
}  // namespace seam::server

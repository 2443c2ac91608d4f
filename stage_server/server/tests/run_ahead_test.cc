// Which descriptor takes a step run ahead: only the wave member that
// continues the last one exactly, as the coordinator describes it.
#include "run_ahead.h"

#include "gtest/gtest.h"

namespace seam::server {
namespace {

// A decode-only wave member of `steps` steps over sequences 7 and 9, shaped
// as the coordinator's descriptors are (one microbatch per wave at PP 1).
v1::MicrobatchDescriptor Member(uint64_t id, uint32_t steps, int64_t position, std::vector<int32_t> tokens) {
  v1::MicrobatchDescriptor d;
  d.set_microbatch_id(id);
  d.set_sequence_number(id);
  d.set_epoch(3);
  d.set_decode_steps(steps);
  d.set_wave_size(1);
  const uint64_t ids[] = {7, 9};
  for (int i = 0; i < 2; ++i) {
    v1::SequenceEntry* s = d.add_sequences();
    s->set_server_request_id("req-" + std::to_string(ids[i]));
    s->set_sequence_id(ids[i]);
    s->add_token_ids(tokens[static_cast<size_t>(i)]);
    s->set_position_start(static_cast<uint64_t>(position + i));
    s->set_dp_group(0);
    s->mutable_sampling()->set_temperature(0.7f);
    s->mutable_sampling()->set_seed(11);
  }
  return d;
}

TEST(RunAhead, TheNextWaveOfTheSameSequencesTakesTheStep) {
  const v1::MicrobatchDescriptor ran = Member(4, 8, 128, {5, 6});
  EXPECT_TRUE(ContinuesWave(ran, 8, {21, 22}, Member(5, 8, 136, {21, 22})));
  EXPECT_TRUE(ContinuesWave(ran, 8, {21, 22}, Member(5, 3, 136, {21, 22}))) << "a shorter next wave";
}

TEST(RunAhead, AnythingElseDropsTheStep) {
  const v1::MicrobatchDescriptor ran = Member(4, 8, 128, {5, 6});
  const std::vector<int32_t> last = {21, 22};
  EXPECT_FALSE(ContinuesWave(ran, 8, last, Member(5, 8, 136, {21, 23}))) << "another input token";
  EXPECT_FALSE(ContinuesWave(ran, 8, last, Member(5, 8, 137, {21, 22}))) << "another position";
  EXPECT_FALSE(ContinuesWave(ran, 4, last, Member(5, 8, 136, {21, 22}))) << "not the position after the wave";
  v1::MicrobatchDescriptor next = Member(5, 8, 136, {21, 22});
  next.mutable_sequences()->RemoveLast();
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "a sequence ended (a stop token)";
  next = Member(5, 8, 136, {21, 22});
  next.mutable_sequences()->SwapElements(0, 1);
  EXPECT_FALSE(ContinuesWave(ran, 8, {22, 21}, next)) << "another order";
  next = Member(5, 8, 136, {21, 22});
  *next.add_sequences() = next.sequences(0);
  next.mutable_sequences(2)->set_sequence_id(12);
  EXPECT_FALSE(ContinuesWave(ran, 8, {21, 22, 21}, next)) << "a sequence joined";
  next = Member(5, 8, 136, {21, 22});
  next.mutable_sequences(1)->mutable_sampling()->set_seed(12);
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "sampled otherwise";
  next = Member(5, 8, 136, {21, 22});
  next.mutable_sequences(0)->set_is_prefill(true);
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "a recomputed prefill";
  next = Member(5, 8, 136, {21, 22});
  next.mutable_sequences(0)->set_dp_group(1);
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "another DP group";
  next = Member(5, 8, 136, {21, 22});
  next.set_epoch(4);
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "another epoch";
  next = Member(5, 8, 136, {21, 22});
  next.set_wave_size(2);
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "a wave of several members";
  next = Member(5, 8, 136, {21, 22});
  next.mutable_sequences(0)->add_token_ids(3);
  EXPECT_FALSE(ContinuesWave(ran, 8, last, next)) << "more than one token";
  EXPECT_FALSE(ContinuesWave(ran, 8, {21}, Member(5, 8, 136, {21, 22}))) << "tokens of another step";
}

}  // namespace
}  // namespace seam::server

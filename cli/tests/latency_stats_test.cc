// latency_stats.h: nearest-rank percentiles and the samples one streamed
// sequence adds, on values chosen so that an off-by-one rank shows.
#include "latency_stats.h"

#include <vector>

#include <gtest/gtest.h>

namespace seam::cli {
namespace {

std::vector<double> OneToHundredShuffled() {
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back((i * 37) % 100 + 1);  // 37 is prime to 100: a permutation
  return v;
}

TEST(Percentile, NearestRankOfOneToHundred) {
  const std::vector<double> v = OneToHundredShuffled();
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(v, 50.5), 51);
}

TEST(Percentile, SmallSetsGiveAMeasuredSample) {
  EXPECT_EQ(Percentile({4, 1, 3, 2}, 50), 2);  // rank 2 of 4: the lower middle, not 2.5
  EXPECT_EQ(Percentile({4, 1, 3, 2}, 99), 4);
  EXPECT_EQ(Percentile({7}, 50), 7);
  EXPECT_EQ(Percentile({7}, 99), 7);
}

TEST(Percentile, NoSamplesIsZero) { EXPECT_EQ(Percentile({}, 50), 0); }

TEST(Percentile, OutOfRangePIsClamped) {
  EXPECT_EQ(Percentile({3, 1, 2}, -5), 1);
  EXPECT_EQ(Percentile({3, 1, 2}, 250), 3);
}

TEST(AddSequence, TtftAndEndToEndFromSubmit) {
  LatencySamples s;
  AddSequence(SequenceTiming{1.0, {{1.5, 1}, {1.75, 1}, {2.0, 1}}}, &s);
  ASSERT_EQ(s.ttft.size(), 1u);
  EXPECT_DOUBLE_EQ(s.ttft[0], 0.5);
  ASSERT_EQ(s.end_to_end.size(), 1u);
  EXPECT_DOUBLE_EQ(s.end_to_end[0], 1.0);
  EXPECT_EQ(s.inter_token, (std::vector<double>{0.25, 0.25}));
  EXPECT_EQ(s.decode_step, (std::vector<double>{0.25}));
}

TEST(AddSequence, AResponseOfSeveralTokensSplitsItsGap) {
  LatencySamples s;
  AddSequence(SequenceTiming{0.0, {{0.5, 2}, {1.5, 4}}}, &s);
  // The first response's second token adds nothing; 1.0 s over 4 tokens adds four 0.25 s gaps.
  EXPECT_EQ(s.inter_token, (std::vector<double>{0.25, 0.25, 0.25, 0.25}));
  EXPECT_DOUBLE_EQ(s.end_to_end[0], 1.5);
  EXPECT_EQ(s.decode_step, (std::vector<double>{0.25}));
}

TEST(AddSequence, ABurstOfResponsesKeepsTheDecodeStep) {
  LatencySamples s;
  // Four tokens made 0.25 s apart reach the client as one burst after the first.
  AddSequence(SequenceTiming{0.0, {{0.25, 1}, {1.0, 1}, {1.0, 1}, {1.0, 1}}}, &s);
  EXPECT_EQ(s.inter_token, (std::vector<double>{0.75, 0.0, 0.0}));
  EXPECT_EQ(Percentile(s.inter_token, 50), 0.0);
  EXPECT_EQ(s.decode_step, (std::vector<double>{0.25}));
}

TEST(AddSequence, OneResponseHasNoDecodeStep) {
  LatencySamples s;
  AddSequence(SequenceTiming{0.0, {{0.5, 3}}}, &s);
  EXPECT_TRUE(s.decode_step.empty());
  EXPECT_TRUE(s.inter_token.empty());
  EXPECT_EQ(s.ttft, (std::vector<double>{0.5}));
}

TEST(AddSequence, NoTokensAddsNothing) {
  LatencySamples s;
  AddSequence(SequenceTiming{3.0, {}}, &s);
  EXPECT_TRUE(s.ttft.empty());
  EXPECT_TRUE(s.inter_token.empty());
  EXPECT_TRUE(s.end_to_end.empty());
  EXPECT_TRUE(s.decode_step.empty());
}

TEST(AddSequence, SamplesOfSequencesAccumulate) {
  LatencySamples s;
  AddSequence(SequenceTiming{0.0, {{0.25, 1}, {0.5, 1}}}, &s);
  AddSequence(SequenceTiming{0.0, {{0.75, 1}, {1.75, 1}}}, &s);
  EXPECT_EQ(s.ttft, (std::vector<double>{0.25, 0.75}));
  EXPECT_EQ(s.inter_token, (std::vector<double>{0.25, 1.0}));
  EXPECT_EQ(Percentile(s.inter_token, 50), 0.25);
}

}  // namespace
}  // namespace seam::cli

// Sample and SampleUniform: the uniform's exact integer recipe, greedy at
// temperature 0, top-k and the top-p nucleus, reproducible draws from
// (seed, step, row), and draws against a double-precision inverse CDF.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::Ints;
using testing::RandomTensor;
using testing::Values;

// The token a row draws, in double: softmax(logits / T), keep the top_k,
// the nucleus of mass ≥ top_p of what is kept, inverse CDF in descending
// probability order with u scaled to the nucleus mass.
int32_t ReferenceDraw(std::vector<double> logits, const SamplingParams& p, double u) {
  const double m = *std::max_element(logits.begin(), logits.end());
  for (double& l : logits) l = std::exp((l - m) / p.temperature);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const size_t kept = p.top_k > 0 ? std::min<size_t>(p.top_k, order.size()) : order.size();
  double total = 0.0;
  for (size_t j = 0; j < kept; ++j) total += logits[order[j]];
  double mass = 0.0;
  size_t nucleus = 0;
  while (nucleus < kept && mass < p.top_p * total) mass += logits[order[nucleus++]];
  double cum = 0.0;
  for (size_t j = 0; j < nucleus; ++j) {
    cum += logits[order[j]];
    if (u * mass < cum) return order[j];
  }
  return order[nucleus - 1];
}

std::vector<int32_t> Draw(const Tensor& logits, const SamplingParams& p, const std::vector<int32_t>& steps) {
  const Tensor out = Tensor::Empty({logits.dim(0)}, DType::kI32);
  SEAM_CHECK_OK(Sample(logits, p, Tensor::FromInts(steps, {logits.dim(0)}), out));
  return Ints(out);
}

TEST(SampleUniform, FollowsTheSplitMix64Recipe) {
  // Values from an independent implementation of h = mix(mix(seed) ^ step),
  // u = (h >> 40) / 2^24; a GPU version must give the same bits.
  EXPECT_EQ(SampleUniform(0, 0), 10946269 / 16777216.0f);
  EXPECT_EQ(SampleUniform(42, 7), 1443373 / 16777216.0f);
  EXPECT_EQ(SampleUniform(~0ull, 123456), 1154057 / 16777216.0f);
  EXPECT_EQ(SampleUniform(1234567890123ull, 0), 10540655 / 16777216.0f);
  EXPECT_EQ(SampleUniform(1234567890123ull, 1), 3235050 / 16777216.0f);
}

TEST(SampleUniform, IsUniformOnTheUnitInterval) {
  double sum = 0.0;
  for (uint64_t i = 0; i < 20000; ++i) {
    const float u = SampleUniform(9 + i % 100, i / 100);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);  // 4.5 standard errors of the mean
}

TEST(Sample, MatchesTheInverseCdfReference) {
  const Tensor logits = RandomTensor({64, 96}, DType::kF32, 81);
  for (const auto& [temperature, top_k, top_p] :
       std::vector<std::tuple<float, int, float>>{{1.0f, 0, 1.0f}, {0.7f, 20, 1.0f}, {0.25f, 0, 0.9f},
                                                  {1.3f, 5, 0.5f}}) {
    const SamplingParams p{temperature, top_k, top_p, 1234};
    std::vector<int32_t> steps(64);
    std::iota(steps.begin(), steps.end(), 100);
    const std::vector<int32_t> got = Draw(logits, p, steps);
    const std::vector<double> lv = Values(logits);
    for (int r = 0; r < 64; ++r) {
      const std::vector<double> row(lv.begin() + r * 96, lv.begin() + (r + 1) * 96);
      EXPECT_EQ(got[r], ReferenceDraw(row, p, SampleUniform(1234, steps[r])))
          << "row " << r << " temperature " << temperature << " top_k " << top_k << " top_p " << top_p;
    }
  }
}

TEST(Sample, SamplingIsReproducibleFromSeedAndStep) {
  const Tensor logits = RandomTensor({7, 96}, DType::kBF16, 82);
  const SamplingParams p{0.9f, 0, 0.95f, 77};
  const std::vector<int32_t> steps = {3, 3, 3, 3, 3, 3, 3};
  const std::vector<int32_t> first = Draw(logits, p, steps);
  EXPECT_EQ(Draw(logits, p, steps), first);
  // Changing one row's step may change only that row's draw.
  std::vector<int32_t> other_steps = steps;
  other_steps[4] = 4;
  std::vector<int32_t> second = Draw(logits, p, other_steps);
  second[4] = first[4];
  EXPECT_EQ(second, first);
}

TEST(Sample, ZeroTemperatureAndTopKOneAreGreedy) {
  const Tensor logits = RandomTensor({7, 96}, DType::kBF16, 83);
  const Tensor argmax = Tensor::Empty({7}, DType::kI32);
  ASSERT_TRUE(Argmax(logits, argmax).ok());
  const std::vector<int32_t> steps = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(Draw(logits, SamplingParams{0.0f, 0, 1.0f, 5}, steps), Ints(argmax));
  EXPECT_EQ(Draw(logits, SamplingParams{1.0f, 1, 1.0f, 5}, steps), Ints(argmax));
}

TEST(Sample, TopPKeepsAtLeastOneToken) {
  const Tensor logits = RandomTensor({7, 96}, DType::kF32, 84);
  const Tensor argmax = Tensor::Empty({7}, DType::kI32);
  ASSERT_TRUE(Argmax(logits, argmax).ok());
  for (int32_t step = 0; step < 20; ++step) {
    EXPECT_EQ(Draw(logits, SamplingParams{1.0f, 0, 1e-6f, 6}, std::vector<int32_t>(7, step)), Ints(argmax));
  }
}

TEST(Sample, DrawFrequenciesFollowTheRenormalisedNucleus) {
  // Probabilities ∝ 8, 4, 2, 1, 1 (logits ln of those). top_k = 4 drops the
  // last token; top_p = 0.9 of the kept mass 15 keeps 8 + 4 + 2 = 14 ≥ 13.5.
  const int rows = 20000;
  std::vector<float> row = {std::log(8.0f), std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  std::vector<float> all;
  for (int r = 0; r < rows; ++r) all.insert(all.end(), row.begin(), row.end());
  std::vector<int32_t> steps(rows);
  std::iota(steps.begin(), steps.end(), 0);
  const std::vector<int32_t> got = Draw(Tensor::FromFloats(all, {rows, 5}), SamplingParams{1.0f, 4, 0.9f, 8}, steps);
  std::vector<int> count(5, 0);
  for (int32_t t : got) ++count[t];
  EXPECT_EQ(count[3] + count[4], 0);
  // Standard error of a frequency is at most 0.0036 here; 0.015 is 4 of them.
  EXPECT_NEAR(count[0] / double(rows), 8.0 / 14, 0.015);
  EXPECT_NEAR(count[1] / double(rows), 4.0 / 14, 0.015);
  EXPECT_NEAR(count[2] / double(rows), 2.0 / 14, 0.015);
}

TEST(Sample, ZeroRowsAreAccepted) {
  EXPECT_TRUE(Sample(Tensor::Empty({0, 96}, DType::kF32), SamplingParams{}, Tensor::FromInts({}, {0}),
                     Tensor::Empty({0}, DType::kI32))
                  .ok());
}

}  // namespace
}  // namespace seam::kernels

// StepTimeModel: the windowed non-negative least squares of step times.
#include "step_time_model.h"

#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seam::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr StepTimeFit kTruth{2.0, 1.5, 0.01, 0.05, 1e-4};

// Features drawn independently (so every term can be told apart), as a
// serving step's: half of them with 1 to 2,048 prefill tokens, up to 256
// decode rows, 300k context.
StepFeatures Draw(std::mt19937& rng) {
  std::uniform_int_distribution<int> coin(0, 1), prefill(1, 2048), rows(0, 256), context(0, 300000);
  StepFeatures f;
  f.prefill_tokens = coin(rng) ? prefill(rng) : 0;
  f.has_prefill = f.prefill_tokens > 0 ? 1 : 0;
  f.decode_rows = rows(rng);
  f.context_tokens = context(rng);
  return f;
}

StepFeatures DecodeOnly(StepFeatures f) {
  f.prefill_tokens = 0;
  f.has_prefill = 0;
  return f;
}

// Exact samples of known coefficients: the fit recovers them to rounding.
// Tolerance 1e-9 relative: the columns are scaled to [0, 1] before the
// normal equations are solved, whose condition number for independent
// uniform features is below 100, so double leaves ~1e-13.
TEST(StepTimeModelTest, RecoversKnownCoefficientsFromExactSamples) {
  std::mt19937 rng(7);
  StepTimeModel model;
  for (int i = 0; i < 64; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  }
  ASSERT_TRUE(model.fit().has_value());
  const StepTimeFit& fit = *model.fit();
  EXPECT_NEAR(fit.intercept_ms, kTruth.intercept_ms, 1e-9 * kTruth.intercept_ms);
  EXPECT_NEAR(fit.prefill_step_ms, kTruth.prefill_step_ms, 1e-9 * kTruth.prefill_step_ms);
  EXPECT_NEAR(fit.prefill_token_ms, kTruth.prefill_token_ms, 1e-9 * kTruth.prefill_token_ms);
  EXPECT_NEAR(fit.decode_row_ms, kTruth.decode_row_ms, 1e-9 * kTruth.decode_row_ms);
  EXPECT_NEAR(fit.context_token_ms, kTruth.context_token_ms, 1e-9 * kTruth.context_token_ms);
}

// Noisy samples (±5 % uniform): the fit's prediction stays within 2 % of
// the truth at a typical step (the noise averages over 256 samples).
TEST(StepTimeModelTest, NoisySamplesPredictWithinTwoPercent) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  StepTimeModel model;
  for (int i = 0; i < 256; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f) * noise(rng)).ok());
  }
  ASSERT_TRUE(model.fit().has_value());
  const StepFeatures typical{1, 1024, 128, 150000};
  EXPECT_NEAR(model.fit()->Predict(typical), kTruth.Predict(typical), 0.02 * kTruth.Predict(typical));
}

TEST(StepTimeModelTest, NoFitBeforeTheMinimumSamples) {
  std::mt19937 rng(3);
  StepTimeModel model(/*window=*/32, /*min_samples=*/16);
  for (int i = 0; i < 15; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
    EXPECT_FALSE(model.fit().has_value()) << "after " << i + 1 << " samples";
  }
  const StepFeatures f = Draw(rng);
  ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  EXPECT_TRUE(model.fit().has_value());
}

// Decode-only steps say nothing of what prefill costs: no fit, so the
// scheduler keeps its row bounds.
TEST(StepTimeModelTest, NoFitWhilePrefillTokensNeverVary) {
  std::mt19937 rng(5);
  StepTimeModel model;
  for (int i = 0; i < 64; ++i) {
    const StepFeatures f = DecodeOnly(Draw(rng));
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  }
  EXPECT_FALSE(model.fit().has_value());
}

// A window of decode-only steps (a lull in arrivals on the same stages)
// cannot price prefill: the last fit stays.
TEST(StepTimeModelTest, AWindowOfDecodeOnlyStepsKeepsTheLastFit) {
  std::mt19937 rng(19);
  StepTimeModel model(/*window=*/32, /*min_samples=*/16);
  for (int i = 0; i < 32; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  }
  for (int i = 0; i < 64; ++i) {
    const StepFeatures f = DecodeOnly(Draw(rng));
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  }
  ASSERT_TRUE(model.fit().has_value());
  EXPECT_NEAR(model.fit()->prefill_token_ms, kTruth.prefill_token_ms, 1e-9 * kTruth.prefill_token_ms);
}

// Three steps with prefill among many without: too few to price prefill.
TEST(StepTimeModelTest, NoFitFromTooFewStepsWithPrefill) {
  std::mt19937 rng(23);
  StepTimeModel model;
  for (int i = 0; i < 64; ++i) {
    StepFeatures f = Draw(rng);
    f.prefill_tokens = 100 + i;  // i = 0, 20, 40, 60 have prefill: the fourth comes last
    f.has_prefill = 1;
    if (i % 20 != 0) f = DecodeOnly(f);
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
    EXPECT_EQ(model.fit().has_value(), i >= 60) << "after " << i + 1 << " samples";
  }
}

// Least squares would give decode rows a negative cost here (steps with
// more rows were faster); the fit keeps every coefficient >= 0 and drops
// that term instead.
TEST(StepTimeModelTest, CoefficientsAreNeverNegative) {
  std::mt19937 rng(9);
  StepTimeModel model;
  for (int i = 0; i < 64; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, 3.0 + 0.02 * f.prefill_tokens - 0.004 * f.decode_rows).ok());
  }
  ASSERT_TRUE(model.fit().has_value());
  const StepTimeFit& fit = *model.fit();
  EXPECT_EQ(fit.decode_row_ms, 0.0);
  EXPECT_GE(fit.intercept_ms, 0.0);
  EXPECT_GE(fit.context_token_ms, 0.0);
  EXPECT_NEAR(fit.prefill_token_ms, 0.02, 0.002);  // within 10 %: the dropped term's share moves into the others
}

// Collinear terms (every step's context a fixed multiple of its rows) do
// not break the fit: a subset without the dependent column explains the
// samples exactly.
TEST(StepTimeModelTest, CollinearTermsStillPredictExactly) {
  std::mt19937 rng(13);
  StepTimeModel model;
  for (int i = 0; i < 64; ++i) {
    StepFeatures f = Draw(rng);
    f.context_tokens = 1000 * f.decode_rows;
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  }
  ASSERT_TRUE(model.fit().has_value());
  const StepFeatures probe{1, 700, 90, 90000};
  EXPECT_NEAR(model.fit()->Predict(probe), kTruth.Predict(probe), 1e-9 * kTruth.Predict(probe));
}

TEST(StepTimeModelTest, RefusesNegativeOrNonFiniteSamples) {
  StepTimeModel model;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [f, ms] : std::vector<std::pair<StepFeatures, double>>{
           {{1, 1, 1, 1}, -1.0}, {{1, 1, 1, 1}, nan}, {{0, -1, 1, 1}, 1.0}, {{1, 1, nan, 1}, 1.0},
           {{1, 1, 1, std::numeric_limits<double>::infinity()}, 1.0}}) {
    const absl::Status st = model.Add(f, ms);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("must be finite and >= 0"));
  }
  const absl::Status st = model.Add({1, 0, 1, 1}, 1.0);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("has_prefill 1 but prefill_tokens 0"));
  EXPECT_EQ(model.samples(), 0);
}

// Only the last `window` samples count: after a full window of a new
// regime the fit is the new one exactly.
TEST(StepTimeModelTest, ForgetsSamplesOlderThanTheWindow) {
  std::mt19937 rng(17);
  StepTimeModel model(/*window=*/32, /*min_samples=*/16);
  for (int i = 0; i < 32; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, kTruth.Predict(f)).ok());
  }
  const StepTimeFit slower{4.0, 1.5, 0.03, 0.05, 1e-4};
  for (int i = 0; i < 32; ++i) {
    const StepFeatures f = Draw(rng);
    ASSERT_TRUE(model.Add(f, slower.Predict(f)).ok());
  }
  EXPECT_EQ(model.samples(), 32);
  ASSERT_TRUE(model.fit().has_value());
  EXPECT_NEAR(model.fit()->prefill_token_ms, 0.03, 1e-9);
  EXPECT_NEAR(model.fit()->intercept_ms, 4.0, 1e-7);
}

}  // namespace
}  // namespace seam::coordinator

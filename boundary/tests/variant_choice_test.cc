// The per-batch variant choice: a pure function of the configuration, the
// topology and the batch's rows per attention-DP group.
#include <gtest/gtest.h>

#include "seam/boundary/variant_choice.h"

namespace seam::boundary {
namespace {

Topology T(int tp, int dp) { return *Topology::Make(tp, dp, 0); }

TEST(VariantChoice, AutoUnpadsRowsThatDoNotDivideOverAttentionTp) {
  VariantChoiceOptions auto_choice;
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(2, 1), {5}), BatchVariant::kUnpadded);
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(2, 1), {6}), BatchVariant::kOrdinary);
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(4, 1), {6}), BatchVariant::kUnpadded);
  // Unpadded is served without attention DP only: padded ordinary rows there.
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(4, 2), {3, 1}), BatchVariant::kOrdinary);
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(1, 1), {5}), BatchVariant::kOrdinary);
}

TEST(VariantChoice, AutoScattersTheInputOfLargeBatchesOverAttentionTp) {
  VariantChoiceOptions auto_choice;
  auto_choice.scatter_input_rows = 8;
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(2, 1), {8}), BatchVariant::kInputScattered);
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(2, 1), {6}), BatchVariant::kOrdinary);
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(4, 2), {9, 0}), BatchVariant::kInputScattered);
  // Without attention TP there is nothing to scatter.
  EXPECT_EQ(ChooseBatchVariant(auto_choice, T(2, 2), {9, 9}), BatchVariant::kOrdinary);
}

TEST(VariantChoice, ConfiguredSequenceParallelTakesEveryBatch) {
  auto sp = *ParseVariantChoice("sequence-parallel");
  EXPECT_EQ(sp.mode, VariantMode::kSequenceParallel);
  EXPECT_EQ(ChooseBatchVariant(sp, T(2, 1), {5}), BatchVariant::kSequenceParallel);
  EXPECT_EQ(ChooseBatchVariant(sp, T(4, 2), {3, 0}), BatchVariant::kSequenceParallel);
  EXPECT_EQ(ParseVariantChoice("sp")->mode, VariantMode::kSequenceParallel);
}

TEST(VariantChoice, FixedVariantsAreValidatedAgainstTheTopology) {
  auto unpadded = *ParseVariantChoice("unpadded");
  EXPECT_EQ(ChooseBatchVariant(unpadded, T(2, 1), {6}), BatchVariant::kUnpadded);
  EXPECT_TRUE(ValidateVariantChoice(unpadded, T(2, 1)).ok());
  const absl::Status dp = ValidateVariantChoice(unpadded, T(2, 2));
  EXPECT_EQ(dp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dp.message(), "unpadded batches are served without attention DP only");
  EXPECT_TRUE(ValidateVariantChoice(*ParseVariantChoice("cp"), T(2, 1)).ok());
  const absl::Status cp = ValidateVariantChoice(*ParseVariantChoice("cp"), T(2, 2));
  EXPECT_EQ(cp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cp.message(), "context-parallel batches are served without attention DP; attn_dp is 2");
  const auto bad = ParseVariantChoice("diagonal");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "unknown batch variant 'diagonal' (auto, ordinary, unpadded, input-scattered, sequence-parallel, "
            "context-parallel)");
}

}  // namespace
}  // namespace seam::boundary

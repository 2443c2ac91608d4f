// Pipeline pieces refuse handoffs that do not fit: a wrong row count, a
// missing or extra handoff, a whole-model call on a piece. The stage group
// refuses before any collective and stays usable; the model refuses too.
#include <gtest/gtest.h>

#include "seam/models/qwen3_model.h"
#include "seam/runtime/stage_group.h"
#include "seam/weights/checkpoint.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::FourLayerCheckpointDir;
using testing::PromptTokens;

std::unique_ptr<StageGroup> Piece(int tp, int first, int end) {
  StageGroupOptions options;
  options.model.first_layer = first;
  options.model.end_layer = end;
  auto group =
      StageGroup::Create(FourLayerCheckpointDir(true), tp, 1, boundary::ReductionPolicy::kAuto, options);
  EXPECT_TRUE(group.ok()) << group.status();
  return group.ok() ? std::move(*group) : nullptr;
}

// The first rows-1 rows of a handoff (both tensors).
boundary::PipelineTensors DropLastRow(const boundary::PipelineTensors& in) {
  boundary::PipelineTensors out = in;
  out.hidden = in.hidden.Rows(0, in.hidden.rows() - 1).Clone();
  if (in.residual.defined()) out.residual = in.residual.Rows(0, in.residual.rows() - 1).Clone();
  return out;
}

class PipelineErrors : public ::testing::TestWithParam<int> {};

TEST_P(PipelineErrors, StageGroupRefusesAHandoffWithTheWrongRowCountAndStaysUsable) {
  const int tp = GetParam();
  auto first = Piece(tp, 0, 2), last = Piece(tp, 2, 4);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(last, nullptr);
  EXPECT_TRUE(first->is_first_piece() && !first->is_last_piece());
  EXPECT_TRUE(!last->is_first_piece() && last->is_last_piece());
  const std::vector<models::SequenceStep> step{models::SequenceStep{7, PromptTokens(4, 6, 128), 0}};

  auto out = first->StepPiece(step, false, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->handoff.size(), static_cast<size_t>(tp));
  EXPECT_TRUE(out->logits.empty());

  std::vector<boundary::PipelineTensors> short_rows = out->handoff;
  short_rows[tp - 1] = DropLastRow(short_rows[tp - 1]);
  auto refused = last->StepPiece(step, false, short_rows);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_EQ(last->DpGroupOf(7), -1);  // nothing placed

  auto missing = last->StepPiece(step, false, {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
  auto extra = first->StepPiece(step, false, out->handoff);
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kInvalidArgument) << extra.status();
  auto whole = last->Step(step, false);
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kFailedPrecondition) << whole.status();

  auto logits = last->StepPiece(step, false, out->handoff);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->logits.size(), 1u);
  EXPECT_EQ(logits->logits[0].shape(), (Shape{1, 128}));
  EXPECT_TRUE(logits->handoff.empty());
}

INSTANTIATE_TEST_SUITE_P(Tp, PipelineErrors, ::testing::Values(1, 2));

TEST(PipelineErrors, ModelPieceRefusesAHandoffWithTheWrongRowCount) {
  auto checkpoint = weights::Checkpoint::Open(FourLayerCheckpointDir(false));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto topology = boundary::Topology::Make(1, 1, 0);
  ASSERT_TRUE(topology.ok());
  auto head = models::Qwen3Model::Load(**checkpoint, models::ModelOptions{*topology, boundary::ReductionPolicy::kAr, DType::kF32, 0, 1});
  auto middle = models::Qwen3Model::Load(**checkpoint, models::ModelOptions{*topology, boundary::ReductionPolicy::kAr, DType::kF32, 1, 3});
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_TRUE(middle.ok()) << middle.status();
  EXPECT_FALSE((*middle)->is_first_piece() || (*middle)->is_last_piece());
  auto head_cache = (*head)->MakeCache({}), middle_cache = (*middle)->MakeCache({});
  ASSERT_TRUE(head_cache.ok() && middle_cache.ok());

  models::StepInput input{{models::SequenceStep{1, PromptTokens(9, 5, 128), 0}}, false};
  boundary::ForwardBatch batch(1, boundary::BatchVariant::kOrdinary, *topology, {5});
  boundary::PipelineTensors handoff;
  auto none = (*head)->ForwardPiece(batch, input, **head_cache, nullptr, &handoff);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->defined());
  EXPECT_EQ(handoff.hidden.rows(), 5);

  boundary::ForwardBatch next(1, boundary::BatchVariant::kOrdinary, *topology, {5});
  boundary::PipelineTensors out;
  const boundary::PipelineTensors short_rows = DropLastRow(handoff);
  auto refused = (*middle)->ForwardPiece(next, input, **middle_cache, &short_rows, &out);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_FALSE((**middle_cache).Has(1));  // nothing reserved
  auto whole = (*middle)->Forward(next, input, **middle_cache);
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kFailedPrecondition) << whole.status();

  auto bad = models::Qwen3Model::Load(**checkpoint, models::ModelOptions{*topology, boundary::ReductionPolicy::kAr, DType::kF32, 2, 2});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

}  // namespace
}  // namespace seam::runtime

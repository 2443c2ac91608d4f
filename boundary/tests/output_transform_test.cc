// Output transforms: processing a producer declares for its contribution
// before its update travels inside the update (TransformedUpdate), so it is
// applied once, to the completed contribution, on every path. Grids bit for
// bit against one rank on the recording fake; the transform's effect checked
// against the plain update on the same layer.
#include <atomic>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "seam/boundary/output_transform.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("output transform grid: %d cases ran\n", cases.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class OutputTransformGrid : public ::testing::TestWithParam<Param> {};

TEST_P(OutputTransformGrid, ATransformedUpdateEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      c.output_transform = true;
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
      ASSERT_TRUE(s.ok()) << c.ToString() << ": " << s;
      ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << c.ToString();
      ++cases;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern;
}

// 5 layouts × 3 variants × 3 policies × 2 patterns (UNPADDED only without
// attention DP: 78 parameters) × 3 row patterns × 2 depths = 468 cases.
INSTANTIATE_TEST_SUITE_P(
    Grid, OutputTransformGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AF"), std::string("MFF"))),
    Name);

class Halve final : public OutputTransform {
 public:
  std::string name() const override { return "halve"; }
  absl::Status Apply(const Tensor& c) const override {
    std::vector<float> v = c.ToFloats();
    for (float& x : v) x *= 0.5f;
    return CopyInto(Tensor::FromFloats(v, c.shape()), c);
  }
};

// One rank: attention, then an FFN whose output is `ffn_out`; folded.
absl::StatusOr<Tensor> FoldedResidual(const StageDeclaration& ffn, const Tensor& input, const Tensor& ffn_out) {
  SelfComms self;
  const Topology t = *Topology::Make(1, 1, 0);
  NormParams n1 = UnitNorm(), n2 = UnitNorm();
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &n1}, StageItem{ffn, &n2}));
  SEAM_RETURN_IF_ERROR(stack.Close());
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {input.rows()});
  batch.comms = self.comms();
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  SEAM_ASSIGN_OR_RETURN(Tensor x, b[0]->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(h, b[0]->Finish(PartialOutput(x, 1), batch));
  SEAM_ASSIGN_OR_RETURN(x, b[1]->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(h, b[1]->Finish(ffn_out, batch));
  SEAM_ASSIGN_OR_RETURN(h, Fold(h, batch));
  return TakeOutput(h, batch);
}

TEST(OutputTransform, IsAppliedOnceBeforeTheUpdate) {
  const Tensor input = Rows(3, 5), out = Rows(4, 5);
  StageDeclaration transformed = DeclareFfn();
  transformed.update = TransformedUpdate(transformed.update, std::make_shared<Halve>());
  EXPECT_EQ(transformed.update->name(), "halve+plain_add");
  EXPECT_FALSE(transformed.update->caps().plain_add);
  auto got = FoldedResidual(transformed, input, out);
  ASSERT_TRUE(got.ok()) << got.status();
  // The plain update of the halved output gives the same residual, bit for bit.
  std::vector<float> half = out.ToFloats();
  for (float& v : half) v *= 0.5f;
  auto want = FoldedResidual(DeclareFfn(), input, Tensor::FromFloats(half, out.shape()));
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(BitEqual(*got, *want));
  // The model's output tensor itself is untouched.
  EXPECT_TRUE(BitEqual(out, Rows(4, 5)));
}

TEST(OutputTransform, NeverFusesAndCrossesAPipelineHandoffWritten) {
  StageDeclaration ffn = DeclareFfn();
  ffn.update = TransformedUpdate(ffn.update, std::make_shared<Halve>());
  EXPECT_EQ(PipelineHandoffState(ffn, BatchVariant::kOrdinary, ReductionPolicy::kAr), StreamState::kWritten);
}

}  // namespace
}  // namespace seam::boundary::testing

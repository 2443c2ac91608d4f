// A component every rank of a sum's group computes in full is added on that
// group's rank 0 only: attention (attention-TP sum) and FFN (TP sum) outputs
// with such a component equal the single-rank run bit for bit on every
// layout; adding it on every rank would count it once per rank. And loading
// refuses a module under a boundary that reduces its own results.
#include <atomic>
#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/replicated_component.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> grid_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("replicated-component grid: %d cases ran\n", grid_cases.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

// x on the 1/8 grid, so every partial sum below is exact.
Tensor OnGrid(const Tensor& x) {
  std::vector<float> v = x.ToFloats();
  for (float& f : v) f = std::nearbyint(f * 8) / 8;
  return Tensor::FromFloats(v, x.shape());
}

// x / 4: what every rank computes in full from the input it holds alike.
Tensor Replicated(const Tensor& x) {
  std::vector<float> v = x.ToFloats();
  for (float& f : v) f /= 4;
  return Tensor::FromFloats(v, x.shape());
}

absl::StatusOr<Tensor> RunWithComponents(const OneLayer& layer, ForwardBatch& batch, const Tensor& input,
                                         bool every_rank) {
  const Topology& t = batch.rows.topology();
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn->Prepare(h, batch));
  x = OnGrid(x);
  Tensor out = PartialOutput(x, t.attn_tp());
  if (every_rank) {
    SEAM_RETURN_IF_ERROR(kernels::AddInPlace(out, Replicated(x)));
  } else {
    SEAM_ASSIGN_OR_RETURN(out, AddReplicatedOnSumRankZero(out, Replicated(x), *layer.attn, batch));
  }
  SEAM_ASSIGN_OR_RETURN(h, layer.attn->Finish(out, batch));
  SEAM_ASSIGN_OR_RETURN(x, layer.ffn->Prepare(h, batch));
  x = OnGrid(x);
  SEAM_ASSIGN_OR_RETURN(out, AddReplicatedOnSumRankZero(PartialOutput(x, t.tp), Replicated(x), *layer.ffn, batch));
  SEAM_ASSIGN_OR_RETURN(h, layer.ffn->Finish(out, batch));
  return FinalNorm(h, batch, layer.final_norm);
}

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy>;
class ReplicatedGrid : public ::testing::TestWithParam<Param> {};

TEST_P(ReplicatedGrid, AComponentEveryRankComputesIsCountedOnce) {
  const auto& [layout, variant, policy] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    int64_t total = 0;
    for (int64_t r : dp_rows) total += r;
    const Tensor all = Rows(31, total);
    const Topology one = *Topology::Make(1, 1, 0);
    auto ref_layer = *BuildOneLayer(one, OneLayerOptions{policy});
    SelfComms self;
    ForwardBatch rb(1, BatchVariant::kOrdinary, one, {total});
    rb.comms = self.comms();
    const Tensor expected = *RunWithComponents(*ref_layer, rb, all, false);
    for (bool every_rank : {false, true}) {
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      auto results = RunRanks(layout.first * layout.second, layout.first, comm::MakeRecordingGroupFactory(registry),
                              [&](const Topology& t, const StageComms& comms) -> absl::Status {
                                SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t, OneLayerOptions{policy}));
                                ForwardBatch batch(1, variant, t, dp_rows);
                                batch.comms = comms;
                                SEAM_ASSIGN_OR_RETURN(Tensor out, RunWithComponents(*layer, batch,
                                                                                    RankInput(all, batch.rows, variant),
                                                                                    every_rank));
                                if (!BitEqual(out, RowsOfReference(expected, out, batch.rows))) {
                                  return absl::InternalError("output differs from the single-rank run");
                                }
                                return absl::OkStatus();
                              });
      bool all_ok = true;
      for (const absl::Status& s : results) all_ok &= s.ok();
      if (!every_rank) {
        for (size_t r = 0; r < results.size(); ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
      } else if (layout.second > 1 && total > 0) {
        EXPECT_FALSE(all_ok) << "adding on every attention-TP rank must count the component more than once";
      }
    }
    ++grid_cases;
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return GridName(std::get<0>(info.param), std::get<1>(info.param), std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Grid, ReplicatedGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv)),
    Name);

TEST(ModuleCheck, LoadingRefusesAModuleThatReducesItsOwnResults) {
  auto layer = *BuildOneLayer(*Topology::Make(1, 1, 0));
  EXPECT_TRUE(CheckModuleLeavesItsSum(*layer->ffn, "mlp.down_proj", false).ok());
  const absl::Status s = CheckModuleLeavesItsSum(*layer->ffn, "mlp.down_proj", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "mlp.down_proj is built with reduce_results=true under a ffn(dense, EXIT_SCOPED) boundary; build it "
            "with reduce_results=false and leave the sum to the boundary");
}

}  // namespace
}  // namespace seam::boundary::testing

// Pipeline splits: the same stack cut into 2 or 3 pipeline pieces, each run by
// its own TP group (recording fake), handing the stream over with ToPp/FromPp.
// With sums that round (non-dyadic weights), a split must still give the
// same bits as the unsplit stack on the same topology.
#include <cstring>
#include <memory>
#include <tuple>

#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {
namespace {

constexpr int kLayers = 4;

// Runs layers [cuts[i], cuts[i+1]) as pipeline piece i; returns each TP rank's output.
std::vector<Tensor> RunPipeline(int dp, int attn_tp, BatchVariant variant, ReductionPolicy policy,
                                const std::string& pattern, const std::vector<int64_t>& dp_rows,
                                const std::vector<int>& cuts, const Tensor& all) {
  const int tp = dp * attn_tp;
  std::vector<PipelineTensors> handoff(tp);
  std::vector<Tensor> outputs(tp);
  for (size_t piece = 0; piece + 1 < cuts.size(); ++piece) {
    StackConfig config{kLayers, policy, 11, pattern, cuts[piece], cuts[piece + 1], false};
    auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
    auto results = RunRanks(tp, dp, comm::MakeRecordingGroupFactory(registry),
                            [&](const Topology& t, const StageComms& comms) -> absl::Status {
                              SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                              ForwardBatch batch(3, variant, t, dp_rows);
                              batch.comms = comms;
                              const bool first = piece == 0, last = piece + 2 == cuts.size();
                              if (first && last) {
                                SEAM_ASSIGN_OR_RETURN(outputs[t.tp_rank],
                                                      stack->Forward(batch, RankInput(all, batch.rows, variant)));
                              } else if (first) {
                                SEAM_ASSIGN_OR_RETURN(handoff[t.tp_rank],
                                                      stack->ForwardToPp(batch, RankInput(all, batch.rows, variant)));
                              } else if (last) {
                                SEAM_ASSIGN_OR_RETURN(outputs[t.tp_rank], stack->ForwardFromPp(batch, handoff[t.tp_rank]));
                              } else {
                                SEAM_ASSIGN_OR_RETURN(handoff[t.tp_rank], stack->ForwardBetween(batch, handoff[t.tp_rank]));
                              }
                              return absl::OkStatus();
                            });
    for (int r = 0; r < tp; ++r) SEAM_CHECK_MSG(results[r].ok(), "piece ", piece, " rank ", r, ": ", results[r].ToString());
    SEAM_CHECK_OK(registry->ExpectSameSequenceInEveryGroup());
  }
  return outputs;
}

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class PipelineSplit : public ::testing::TestWithParam<Param> {};

TEST_P(PipelineSplit, SplitStackIsBitIdenticalToTheUnsplitStack) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED is served without attention DP only";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    int64_t total = 0;
    for (int64_t r : dp_rows) total += r;
    const Tensor all = StackInput(5, total);
    const auto whole = RunPipeline(layout.first, layout.second, variant, policy, pattern, dp_rows, {0, kLayers}, all);
    for (const std::vector<int>& cuts : {std::vector<int>{0, 1, kLayers}, std::vector<int>{0, 2, kLayers},
                                         std::vector<int>{0, 1, 3, kLayers}}) {
      const auto split = RunPipeline(layout.first, layout.second, variant, policy, pattern, dp_rows, cuts, all);
      for (size_t r = 0; r < whole.size(); ++r) {
        ASSERT_TRUE(BitEqual(split[r], whole[r])) << "rank " << r << " cuts " << ::testing::PrintToString(cuts)
                                                  << " rows " << ::testing::PrintToString(dp_rows);
      }
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern;
}

INSTANTIATE_TEST_SUITE_P(
    Splits, PipelineSplit,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(2, 1),
                                         std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AF"), std::string("MF"))),
    Name);

}  // namespace
}  // namespace seam::boundary::testing

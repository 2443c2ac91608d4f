// The exact-arithmetic grid: a synthetic stack of 1–4 layers, run on every
// supported (attention DP, attention TP) layout, row pattern, reduction
// policy and batch variant over the recording fake, must equal the
// single-rank run bit for bit, and every rank of every group must issue the
// same collective sequence.
#include <atomic>
#include <cstring>
#include <tuple>

#include <gtest/gtest.h>

#include "rank_threads.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> cases_run{0};

class GridCountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("exact grid: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new GridCountReporter);

std::vector<std::vector<int64_t>> RowPatterns(int dp) {
  const std::vector<int64_t> equal = {6, 6, 6, 6}, ragged = {7, 3, 5, 2}, one_empty = {0, 5, 3, 4};
  return {std::vector<int64_t>(equal.begin(), equal.begin() + dp),
          std::vector<int64_t>(ragged.begin(), ragged.begin() + dp),
          std::vector<int64_t>(one_empty.begin(), one_empty.begin() + dp)};
}

// The single-rank reference output for all rows.
Tensor Reference(const StackConfig& config, const Tensor& input) {
  auto topology = *Topology::Make(1, 1, 0);
  auto stack = SyntheticStack::Build(config, topology);
  SEAM_CHECK_OK(stack.status());
  auto self = comm::MakeSelfCommunicator("tp");
  ForwardBatch batch(1, BatchVariant::kOrdinary, topology, {input.rows()});
  batch.comms = StageComms{self.get(), self.get(), self.get()};
  auto out = (*stack)->Forward(batch, input);
  SEAM_CHECK_OK(out.status());
  return *out;
}

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

using GridParam = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy>;

class ExactGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(ExactGrid, DistributedStackEqualsSingleRankBitForBit) {
  const auto [layout, variant, policy] = GetParam();
  const auto [dp, attn_tp] = layout;
  const int tp = dp * attn_tp;
  for (const std::vector<int64_t>& dp_rows : RowPatterns(dp)) {
    for (int layers = 1; layers <= 4; ++layers) {
      StackConfig config{layers, ResolveReductionPolicy(policy, "qwen3"), static_cast<uint64_t>(layers)};
      int64_t total = 0;
      for (int64_t r : dp_rows) total += r;
      const Tensor all = StackInput(config.seed + 99, total);
      const Tensor expected = Reference(config, all);
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      auto results = RunRanks(tp, dp, comm::MakeRecordingGroupFactory(registry),
                              [&](const Topology& t, const StageComms& comms) -> absl::Status {
                                SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                                ForwardBatch batch(1, variant, t, dp_rows);
                                batch.comms = comms;
                                SEAM_ASSIGN_OR_RETURN(Tensor out,
                                                      stack->Forward(batch, RankInput(all, batch.rows, variant)));
                                int64_t offset = 0;
                                for (int d = 0; d < t.dp_rank(); ++d) offset += dp_rows[d];
                                if (!BitEqual(out, expected.Rows(offset, dp_rows[t.dp_rank()]).Clone())) {
                                  return absl::InternalError("output differs from the single-rank reference");
                                }
                                return absl::OkStatus();
                              });
      for (int r = 0; r < tp; ++r) {
        ASSERT_TRUE(results[r].ok()) << "rank " << r << " layers " << layers << " rows " << ::testing::PrintToString(dp_rows)
                                     << ": " << results[r];
      }
      ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << registry->ExpectSameSequenceInEveryGroup();
      ++cases_run;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<GridParam>& info) {
  const auto [layout, variant, policy] = info.param;
  std::string p = ReductionPolicyName(policy);
  for (char& c : p) {
    if (c == '+') c = '_';
  }
  return "dp" + std::to_string(layout.first) + "_atp" + std::to_string(layout.second) + "_" +
         BatchVariantName(variant) + "_" + p;
}

INSTANTIATE_TEST_SUITE_P(
    Grid, ExactGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2), std::make_pair(4, 1)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsv,
                                         ReductionPolicy::kRsRsv, ReductionPolicy::kAuto)),
    Name);

}  // namespace
}  // namespace seam::boundary::testing

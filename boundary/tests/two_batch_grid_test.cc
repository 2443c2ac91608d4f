// The exact-arithmetic grid of two-batch overlap: a synthetic stack whose
// batch is split into two operation-scheduled microbatches (even, odd and
// one-sided splits, a part empty on a DP group or everywhere), split at the
// stack input, after an attention or after a whole layer, run in every
// interleaving and merged (the final-norm rows, or the streams before the
// final norm), must equal the single-rank unsplit run bit for bit at TP
// {1, 2, 4} × attention DP {1, 2}, with every rank of every group issuing the
// same collective sequence and nothing owed at the end.
#include <atomic>
#include <tuple>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grid_case.h"
#include "rank_threads.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> cases_run{0};

class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("two-batch grid: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

struct TboCase {
  int dp = 1, attn_tp = 1;
  BatchVariant variant = BatchVariant::kOrdinary;
  ReductionPolicy policy = ReductionPolicy::kAr;
  std::string pattern = "AF";
  bool output_transform = false;
  std::vector<int64_t> dp_rows;
  SyntheticStack::TwoBatchRun run;
  std::string ToString() const {
    return absl::StrCat("dp=", dp, " attn_tp=", attn_tp, " ", BatchVariantName(variant), " ",
                        ReductionPolicyName(policy), " ", pattern, output_transform ? " transform" : "", " rows [",
                        absl::StrJoin(dp_rows, ", "), "] A [", absl::StrJoin(run.a_dp_rows, ", "), "] ",
                        TboOrderName(run.order), " split after ", run.split_after,
                        run.merge_streams ? " merge streams" : " merge rows");
  }
};

absl::Status RunTboCase(const TboCase& c, const std::shared_ptr<comm::RecordingRegistry>& registry) {
  StackConfig config{2, c.policy, 5, c.pattern};
  config.output_transform = c.output_transform;
  int64_t total = 0;
  for (int64_t r : c.dp_rows) total += r;
  const Tensor all = StackInput(config.seed + 99, total);
  // The single-rank unsplit reference.
  SEAM_ASSIGN_OR_RETURN(Topology one, Topology::Make(1, 1, 0));
  SEAM_ASSIGN_OR_RETURN(auto ref, SyntheticStack::Build(config, one));
  auto self = comm::MakeSelfCommunicator("tp");
  ForwardBatch ref_batch(1, BatchVariant::kOrdinary, one, {total});
  ref_batch.comms = StageComms{self.get(), self.get(), self.get()};
  SEAM_ASSIGN_OR_RETURN(const Tensor expected, ref->Forward(ref_batch, all));
  auto results = RunRanks(c.dp * c.attn_tp, c.dp, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                            ForwardBatch batch(1, c.variant, t, c.dp_rows);
                            batch.comms = comms;
                            SEAM_ASSIGN_OR_RETURN(
                                Tensor out, stack->ForwardTwoBatch(batch, RankInput(all, batch.rows, c.variant), c.run));
                            if (batch.stream != nullptr) return absl::InternalError("the batch still holds a stream");
                            int64_t offset = 0;
                            for (int d = 0; d < t.dp_rank(); ++d) offset += c.dp_rows[d];
                            if (!BitEqual(out, expected.Rows(offset, c.dp_rows[t.dp_rank()]).Clone())) {
                              return absl::InternalError("output differs from the single-rank unsplit run");
                            }
                            return absl::OkStatus();
                          });
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok()) return absl::Status(results[r].code(), absl::StrCat("rank ", r, ": ", results[r].message()));
  }
  return registry->ExpectSameSequenceInEveryGroup();
}

// Splits of `rows`: about half (odd counts where they fall), all to B on the
// first group, everything to A.
std::vector<std::vector<int64_t>> SplitsOf(const std::vector<int64_t>& rows) {
  std::vector<int64_t> half, first_empty, all_a = rows;
  for (int64_t r : rows) half.push_back((r + 1) / 2);
  first_empty = half;
  first_empty[0] = 0;
  return {half, first_empty, all_a};
}

using Param = std::tuple<std::pair<int, int>, BatchVariant, TboOrder>;
class TwoBatchGrid : public ::testing::TestWithParam<Param> {};

TEST_P(TwoBatchGrid, SplitRunMergeEqualsUnsplitSingleRankBitForBit) {
  const auto [layout, variant, order] = GetParam();
  const auto [dp, attn_tp] = layout;
  if (variant == BatchVariant::kUnpadded && dp > 1) GTEST_SKIP() << "UNPADDED is served without attention DP only";
  const std::vector<std::vector<int64_t>> row_patterns = {dp == 1 ? std::vector<int64_t>{7} : std::vector<int64_t>{7, 3},
                                                          dp == 1 ? std::vector<int64_t>{6} : std::vector<int64_t>{0, 5}};
  struct Stack {
    std::string pattern;
    bool transform;
  };
  const Stack stacks[] = {{"AF", false}, {"AE", false}, {"MF", false}, {"AF", true}};
  for (const Stack& s : stacks) {
    for (ReductionPolicy policy : {ReductionPolicy::kAr, ReductionPolicy::kRsRsv}) {
      for (const std::vector<int64_t>& rows : row_patterns) {
        for (const std::vector<int64_t>& a : SplitsOf(rows)) {
          for (int split_after : {0, 1, 2}) {
            for (bool merge_streams : {false, true}) {
              TboCase c{dp, attn_tp, variant, policy, s.pattern, s.transform, rows,
                        SyntheticStack::TwoBatchRun{a, order, split_after, merge_streams}};
              auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
              const absl::Status st = RunTboCase(c, registry);
              ASSERT_TRUE(st.ok()) << c.ToString() << ": " << st;
              ++cases_run;
            }
          }
        }
      }
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [layout, variant, order] = info.param;
  std::string o = TboOrderName(order);
  for (char& ch : o) {
    if (ch == '-') ch = '_';
  }
  return absl::StrCat("dp", layout.first, "_atp", layout.second, "_", BatchVariantName(variant), "_", o);
}

INSTANTIATE_TEST_SUITE_P(Grid, TwoBatchGrid,
                         ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2),
                                                              std::make_pair(2, 1), std::make_pair(1, 4),
                                                              std::make_pair(2, 2)),
                                            ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                                              BatchVariant::kInputScattered,
                                                              BatchVariant::kSequenceParallel),
                                            ::testing::Values(TboOrder::kAlternate, TboOrder::kAlternateBFirst,
                                                              TboOrder::kStaggered, TboOrder::kSequential)),
                         Name);

}  // namespace
}  // namespace seam::boundary::testing

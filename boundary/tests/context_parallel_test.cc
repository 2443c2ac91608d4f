// Context-parallel batches: the zig-zag token mapping, and the exact grid of
// CP layouts (cp × attention TP, one DP group) where a synthetic stack whose
// attentions mix each sequence's earlier rows (read through GatherContext)
// must equal the single-rank run bit for bit, with every rank of every group
// issuing the same collectives, whole and cut into pipeline pieces.
#include <atomic>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/context_parallel.h"
#include "seam/boundary/variant_choice.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"

namespace seam::boundary::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CpRowMap, ZigZagChunksOfEachSequence) {
  auto map = CpRowMap::Make({8, 4}, 2);
  ASSERT_TRUE(map.ok()) << map.status();
  // Sequence 0: chunks [0,2) [2,4) [4,6) [6,8); sequence 1 (rows 8..11): one row each.
  EXPECT_THAT(map->NaturalRowsOf(0), ElementsAre(0, 1, 6, 7, 8, 11));
  EXPECT_THAT(map->NaturalRowsOf(1), ElementsAre(2, 3, 4, 5, 9, 10));
  EXPECT_THAT(map->Counts(), ElementsAre(6, 6));
  const std::vector<int32_t> order = map->RankMajorNaturalRows();
  const std::vector<int32_t> place = map->GatheredPlaceOfNatural();
  for (int32_t n = 0; n < 12; ++n) EXPECT_EQ(order[place[n]], n);
  ASSERT_EQ(map->ChunksOf(1).size(), 4u);
  EXPECT_EQ(map->ChunksOf(1)[1].begin, 4);
  EXPECT_EQ(map->ChunksOf(1)[1].offset, 4);
  EXPECT_EQ(map->ChunksOf(1)[3].begin, 10);
  EXPECT_EQ(map->ChunksOf(1)[3].offset, 2);
}

TEST(CpRowMap, ShortSequencesLeaveChunksEmpty) {
  auto map = CpRowMap::Make({3, 0, 1}, 2);
  ASSERT_TRUE(map.ok()) << map.status();
  // Sequence 0 (3 rows): chunks [0,0) [0,1) [1,2) [2,3); sequence 2 (row 3): chunk 3 only.
  EXPECT_THAT(map->NaturalRowsOf(0), ElementsAre(2, 3));
  EXPECT_THAT(map->NaturalRowsOf(1), ElementsAre(0, 1));
  EXPECT_EQ(map->total_rows(), 4);
}

TEST(CpRowMap, RefusesNegativeRowsAndSizes) {
  EXPECT_EQ(CpRowMap::Make({2, -1}, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CpRowMap::Make({2}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpConfiguration, ContextParallelismIsServedWithoutAttentionDp) {
  auto t = Topology::Make(4, 2, 0, 2);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("without attention DP"));
  EXPECT_EQ(Topology::Make(4, 1, 0, 3).status().code(), absl::StatusCode::kInvalidArgument);
  const Topology cp = *Topology::Make(4, 1, 3, 2);
  EXPECT_EQ(cp.attn_tp(), 2);
  EXPECT_EQ(cp.cp_rank(), 1);
  EXPECT_EQ(cp.attn_tp_rank(), 1);
  EXPECT_EQ(Layout::Of(RowForm::kCpRows, cp).ToString(), "[ATTN_CP]");

  VariantChoiceOptions cp_mode = *ParseVariantChoice("context-parallel");
  EXPECT_EQ(cp_mode.mode, VariantMode::kContextParallel);
  const absl::Status dp = ValidateVariantChoice(cp_mode, *Topology::Make(4, 2, 0));
  EXPECT_EQ(dp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dp.message()), HasSubstr("without attention DP"));
  const absl::Status sp = ValidateVariantChoice(*ParseVariantChoice("sp"), cp);
  EXPECT_EQ(sp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sp.message()), HasSubstr("context-parallel ranks"));
  EXPECT_TRUE(ValidateVariantChoice(cp_mode, cp).ok());
}

TEST(CpConfiguration, ChoosesContextParallelForPrefillOnly) {
  const Topology cp = *Topology::Make(2, 1, 0, 2);
  VariantChoiceOptions automatic;
  automatic.cp_min_rows = 64;
  EXPECT_EQ(ChooseBatchVariant(automatic, cp, {64}, /*prefill=*/true), BatchVariant::kContextParallel);
  EXPECT_EQ(ChooseBatchVariant(automatic, cp, {63}, true), BatchVariant::kOrdinary);
  EXPECT_EQ(ChooseBatchVariant(automatic, cp, {200}, /*prefill=*/false), BatchVariant::kOrdinary);
  // Without CP ranks, auto never chooses it.
  EXPECT_EQ(ChooseBatchVariant(automatic, *Topology::Make(2, 1, 0), {64}, true), BatchVariant::kOrdinary);
  const VariantChoiceOptions every = *ParseVariantChoice("cp");
  EXPECT_EQ(ChooseBatchVariant(every, cp, {3}, true), BatchVariant::kContextParallel);
  EXPECT_EQ(ChooseBatchVariant(every, cp, {3}, false), BatchVariant::kOrdinary);
  // Attention TP 2 within each CP rank: rows that do not divide run unpadded.
  EXPECT_EQ(ChooseBatchVariant(every, *Topology::Make(4, 1, 0, 2), {3}, false), BatchVariant::kUnpadded);
}

TEST(CpConfiguration, ScatteredVariantsHaveNoPathWithCpRanks) {
  GridCase c{1, 1, BatchVariant::kInputScattered, ReductionPolicy::kAr, {6}, 1};
  c.cp = 2;
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  const absl::Status result = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
  EXPECT_EQ(result.code(), absl::StatusCode::kUnimplemented) << result;
  EXPECT_THAT(std::string(result.message()), HasSubstr("no stage boundary path for the active INPUT_SCATTERED batch"));
}

std::atomic<int> cases_run{0};
class CpCountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("context-parallel grid: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CpCountReporter);

// Sequences of the one DP group: long, several (one a single row), short ones.
std::vector<std::vector<int64_t>> SequencePatterns() { return {{13}, {5, 1, 8}, {3, 9, 2, 6}, {1}}; }

using CpParam = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class CpGrid : public ::testing::TestWithParam<CpParam> {};

TEST_P(CpGrid, DistributedStackEqualsSingleRankBitForBit) {
  const auto [layout, variant, policy, pattern] = GetParam();
  const auto [cp, attn_tp] = layout;
  for (const std::vector<int64_t>& sequences : SequencePatterns()) {
    int64_t rows = 0;
    for (int64_t r : sequences) rows += r;
    for (int layers = 1; layers <= 4; ++layers) {
      for (bool causal : {false, true}) {
        GridCase c{1, attn_tp, variant, policy, {rows}, layers};
        c.cp = cp;
        c.sequences = sequences;
        c.causal_mix = causal;
        c.pattern = pattern;
        c.capture = pattern == "AF";
        auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
        const absl::Status result = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
        ASSERT_TRUE(result.ok()) << c.ToString() << ": " << result;
        ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << registry->ExpectSameSequenceInEveryGroup();
        if (variant == BatchVariant::kContextParallel && cp > 1 && rows > 0) {
          // The CP rows travel by variable all-gathers over the CP group.
          ASSERT_GT(CountCollectives(*registry, comm::CollectiveKind::kAllGatherV), 0) << c.ToString();
          if (attn_tp == 1 && policy != ReductionPolicy::kAr) {
            // Every FFN sum lands on the CP rows by a reduce-scatter with the CP mapping.
            ASSERT_EQ(CountCollectives(*registry, comm::CollectiveKind::kAllReduce), 0) << c.ToString();
            ASSERT_GT(ReduceScatters(*registry), 0) << c.ToString();
          }
        }
        ++cases_run;
      }
    }
  }
}

std::string Name(const ::testing::TestParamInfo<CpParam>& info) {
  const auto [layout, variant, policy, pattern] = info.param;
  return absl::StrCat("cp", layout.first, "_", GridName({1, layout.second}, variant, policy), "_", pattern);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CpGrid,
    ::testing::Combine(::testing::Values(std::make_pair(2, 1), std::make_pair(2, 2), std::make_pair(4, 1)),
                       ::testing::Values(BatchVariant::kContextParallel, BatchVariant::kOrdinary,
                                         BatchVariant::kUnpadded),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsv,
                                         ReductionPolicy::kRsRsv, ReductionPolicy::kAuto),
                       ::testing::Values(std::string("AF"), std::string("MF"))),
    Name);

// A CP stack cut into pipeline pieces (each its own recording TP group)
// equals the single-rank run bit for bit: the handoff crosses on the DP rows.
TEST(CpPipeline, PiecesEqualSingleRankBitForBit) {
  constexpr int kLayers = 4;
  for (auto [cp, attn_tp] : {std::make_pair(2, 1), std::make_pair(2, 2)}) {
    for (ReductionPolicy policy : {ReductionPolicy::kAr, ReductionPolicy::kRsRsv}) {
      for (const std::vector<int>& cuts : {std::vector<int>{0, 1, kLayers}, std::vector<int>{0, 2, kLayers},
                                           std::vector<int>{0, 1, 3, kLayers}}) {
        const std::vector<int64_t> sequences = {5, 1, 8};
        const int64_t rows = 14;
        StackConfig whole{kLayers, policy, 11, "AF"};
        whole.causal_mix = true;
        const Tensor all = StackInput(5, rows);
        // The single-rank reference over the whole stack.
        auto self = comm::MakeSelfCommunicator("tp");
        const Topology one = *Topology::Make(1, 1, 0);
        auto ref_stack = *SyntheticStack::Build(whole, one);
        ForwardBatch ref_batch(1, BatchVariant::kOrdinary, one, {rows});
        ref_batch.comms = StageComms{self.get(), self.get(), self.get(), self.get()};
        ASSERT_TRUE(ref_batch.SetSequenceRows(sequences).ok());
        const Tensor expected = *ref_stack->Forward(ref_batch, all);

        const int tp = cp * attn_tp;
        std::vector<PipelineTensors> handoff(tp);
        std::vector<Tensor> outputs(tp);
        for (size_t piece = 0; piece + 1 < cuts.size(); ++piece) {
          StackConfig config = whole;
          config.first_layer = cuts[piece];
          config.end_layer = cuts[piece + 1];
          auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
          auto results = RunRanks(
              tp, 1, comm::MakeRecordingGroupFactory(registry),
              [&](const Topology& t, const StageComms& comms) -> absl::Status {
                SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                ForwardBatch batch(3, BatchVariant::kContextParallel, t, {rows});
                batch.comms = comms;
                SEAM_RETURN_IF_ERROR(batch.SetSequenceRows(sequences));
                const bool first = piece == 0, last = piece + 2 == cuts.size();
                if (first) {
                  SEAM_ASSIGN_OR_RETURN(handoff[t.tp_rank], stack->ForwardToPp(batch, all));
                } else if (last) {
                  SEAM_ASSIGN_OR_RETURN(outputs[t.tp_rank], stack->ForwardFromPp(batch, handoff[t.tp_rank]));
                } else {
                  SEAM_ASSIGN_OR_RETURN(handoff[t.tp_rank], stack->ForwardBetween(batch, handoff[t.tp_rank]));
                }
                return absl::OkStatus();
              },
              cp);
          for (int r = 0; r < tp; ++r) ASSERT_TRUE(results[r].ok()) << "piece " << piece << " rank " << r << ": " << results[r];
          ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok());
        }
        for (int r = 0; r < tp; ++r) {
          ASSERT_TRUE(BitEqual(outputs[r], expected)) << "cp " << cp << " attn_tp " << attn_tp << " rank " << r
                                                      << " cuts " << ::testing::PrintToString(cuts);
        }
        ++cases_run;
      }
    }
  }
}

}  // namespace
}  // namespace seam::boundary::testing

// can_defer_all_reduce: an FFN whose output holds a part every rank computes
// in full (LoRA, a shared expert on TP 1; added on TP rank 0) leaves its TP
// all-reduce to the next input only when its provider accepts the batch;
// otherwise its exit completes the sum. Both equal the single-rank run bit
// for bit on every layout.
#include <atomic>
#include <tuple>

#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/replicated_component.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> grid_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("can_defer_all_reduce grid: %d cases ran\n", grid_cases.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

class OddBatches final : public FusionProvider {
 public:
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan&) const override { return {}; }
  bool CanDeferAllReduce(const StagePlan&, const ForwardBatch& batch) const override {
    ++asked;
    return batch.microbatch_id % 2 == 1;
  }
  mutable std::atomic<int> asked{0};
};

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class DeferAllReduceGrid : public ::testing::TestWithParam<Param> {};

TEST_P(DeferAllReduceGrid, DeferredOrCompletedTheSumEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  auto provider = std::make_shared<OddBatches>();
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      for (uint64_t id : {1, 2}) {
        GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
        c.pattern = pattern;
        c.fusions = provider;
        c.on_batch = [id](ForwardBatch& b) { b.microbatch_id = id; };
        auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
        const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
        ASSERT_TRUE(s.ok()) << c.ToString() << " microbatch " << id << ": " << s;
        ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << c.ToString();
        ++grid_cases;
      }
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern;
}

INSTANTIATE_TEST_SUITE_P(
    Grid, DeferAllReduceGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AL"), std::string("ML"), std::string("ALF"))),
    Name);

TEST(DeferAllReduce, TheSumWaitsForTheNextInputOnlyWhenTheProviderAccepts) {
  auto provider = std::make_shared<OddBatches>();
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
    NormParams norm = UnitNorm();
    LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
    FfnDeclOptions lora;
    lora.defers_only_with_provider = true;
    StageOptions with;
    with.fusions = provider;
    SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm},
                                                     StageItem{DeclareFfn(lora), &norm, with},
                                                     StageItem{DeclareAttn(), &norm}));
    SEAM_RETURN_IF_ERROR(stack.Close());
    if (!b[1]->plan().Find(BatchVariant::kOrdinary)->exit.facts.leave_needs_provider) {
      return absl::InternalError("the plan does not record that leaving needs the provider");
    }
    for (uint64_t id : {1, 2}) {
      ForwardBatch batch(id, BatchVariant::kOrdinary, t, {4});
      batch.comms = comms;
      SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, Rows(3, 4)));
      SEAM_ASSIGN_OR_RETURN(Tensor x, b[0]->Prepare(h, batch));
      SEAM_ASSIGN_OR_RETURN(h, b[0]->Finish(PartialOutput(x, 2), batch));
      SEAM_ASSIGN_OR_RETURN(x, b[1]->Prepare(h, batch));
      SEAM_ASSIGN_OR_RETURN(Tensor out, AddReplicatedOnSumRankZero(PartialOutput(x, 2), Rows(4, 4), *b[1], batch));
      SEAM_ASSIGN_OR_RETURN(auto scope, b[1]->Exit(batch));
      SEAM_ASSIGN_OR_RETURN(h, scope->Finish(out));
      const SumGroup owed = batch.stream->pending()->owed;
      if ((id == 1) != (owed == SumGroup::kTp)) {
        return absl::InternalError(absl::StrCat("microbatch ", id, " left ", SumGroupName(owed)));
      }
      SEAM_RETURN_IF_ERROR(b[2]->Prepare(h, batch).status());
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  EXPECT_GT(provider->asked.load(), 0);
}

}  // namespace
}  // namespace seam::boundary::testing

// Qwen3-MoE's deferred finalize at TP 2 on CPU ranks over real Gloo, every
// call logged (comm::CollectiveLog): with ModelOptions::defer_moe_finalize on,
// the last sparse layer's finalize runs before the one all-reduce the plain
// path does, so a prefill and a decode step move exactly the plain path's
// calls and bytes in every group, never the [rows, top_k, H] expert outputs,
// and the logits are the plain path's bit for bit (the same finalize, the
// same all-reduce, the same add + norm). With and without attention DP; the
// policy `auto` (rsv for qwen3_moe) keeps the plain exit where it scatters.
#include <cstdio>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "seam/comm/collective_log.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/status.h"
#include "seam/models/qwen3_model.h"
#include "seam/testing/rank_rendezvous.h"
#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::models {
namespace {

struct Layout {
  int tp = 2, attn_dp = 1;
  boundary::ReductionPolicy policy = boundary::ReductionPolicy::kAr;
};

// Sequence lengths of each DP group's prefill (every sequence then decodes one token).
std::vector<std::vector<int>> PromptLengths(int attn_dp) {
  return attn_dp == 1 ? std::vector<std::vector<int>>{{5, 9, 3}} : std::vector<std::vector<int>>{{5, 9}, {3}};
}

struct Outcome {
  std::shared_ptr<comm::CollectiveLog> log = std::make_shared<comm::CollectiveLog>();
  std::vector<std::vector<Tensor>> logits;  // per rank: the prefill's, then the decode step's
};

// One rank's prefill and decode step.
absl::Status RankSteps(Qwen3Model& model, const boundary::Topology& topology, const boundary::StageComms& comms,
                       std::vector<Tensor>* logits) {
  const std::vector<std::vector<int>> lengths = PromptLengths(topology.attn_dp);
  std::vector<int64_t> prefill_rows, decode_rows;
  for (const std::vector<int>& group : lengths) {
    int64_t rows = 0;
    for (int l : group) rows += l;
    prefill_rows.push_back(rows);
    decode_rows.push_back(static_cast<int64_t>(group.size()));
  }
  const int d = topology.dp_rank();
  StepInput prefill, decode;
  prefill.all_logits = true;
  for (size_t s = 0; s < lengths[d].size(); ++s) {
    const uint64_t id = 100 * d + s;
    prefill.sequences.push_back(SequenceStep{id, testing::PromptTokens(static_cast<int>(7 * d + s), lengths[d][s], 128), 0});
    decode.sequences.push_back(SequenceStep{id, {static_cast<int32_t>(11 + s)}, lengths[d][s]});
  }
  SEAM_ASSIGN_OR_RETURN(auto cache, model.MakeCache({}));
  boundary::ForwardBatch first(1, boundary::BatchVariant::kOrdinary, topology, prefill_rows);
  first.comms = comms;
  SEAM_ASSIGN_OR_RETURN(Tensor a, model.Forward(first, prefill, *cache));
  boundary::ForwardBatch second(2, boundary::BatchVariant::kOrdinary, topology, decode_rows);
  second.comms = comms;
  SEAM_ASSIGN_OR_RETURN(Tensor b, model.Forward(second, decode, *cache));
  *logits = {a, b};
  return absl::OkStatus();
}

absl::StatusOr<Outcome> RunOn(const Layout& layout, bool defer) {
  SEAM_ASSIGN_OR_RETURN(auto checkpoint, weights::Checkpoint::Open(testing::TinyCheckpointDir(true)));
  seam::testing::TempDir dir("seam_deferred_bytes");
  SEAM_ASSIGN_OR_RETURN(auto store, comm::MakeFileStore(dir.path()));
  Outcome run;
  run.logits.resize(layout.tp);
  const comm::CommunicatorFactory factory = comm::MakeLoggedGroupFactory(
      comm::MakeGlooGroupFactory(store, comm::CommOptions{absl::Seconds(30)}), run.log);
  std::vector<absl::Status> results(layout.tp);
  std::vector<std::thread> threads;
  seam::testing::RankRendezvous teardown(layout.tp);
  for (int r = 0; r < layout.tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::ProcessGroups> groups;  // torn down once every rank is done
      seam::testing::ArriveOnExit done(teardown);
      results[r] = [&]() -> absl::Status {
        SEAM_ASSIGN_OR_RETURN(groups, comm::ProcessGroups::Create(comm::Topology{layout.tp, layout.attn_dp, 1}, r,
                                                                  factory));
        SEAM_ASSIGN_OR_RETURN(boundary::Topology topology, boundary::Topology::Make(layout.tp, layout.attn_dp, r));
        ModelOptions options{topology, boundary::ResolveReductionPolicy(layout.policy, "qwen3_moe"), DType::kF32};
        options.defer_moe_finalize = defer;
        SEAM_ASSIGN_OR_RETURN(auto model, Qwen3Model::Load(*checkpoint, options));
        const boundary::StageComms comms{&groups->tp(), &groups->attn_tp(), &groups->attn_dp()};
        return RankSteps(*model, topology, comms, &run.logits[r]);
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < layout.tp; ++r) {
    if (!results[r].ok()) return absl::Status(results[r].code(), absl::StrCat("rank ", r, ": ", results[r].message()));
  }
  return run;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

class DeferredFinalizeBytes : public ::testing::TestWithParam<Layout> {};

TEST_P(DeferredFinalizeBytes, DeferredFinalizeMovesExactlyThePlainPathsBytes) {
  const Layout layout = GetParam();
  const absl::StatusOr<Outcome> deferred = RunOn(layout, true);
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  const absl::StatusOr<Outcome> plain = RunOn(layout, false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(deferred->log->Groups(), plain->log->Groups());
  for (const std::string& group : plain->log->Groups()) {
    for (int r = 0; r < layout.tp; ++r) {
      const std::vector<comm::CollectiveRecord> got = deferred->log->Calls(group, r);
      const std::vector<comm::CollectiveRecord> want = plain->log->Calls(group, r);
      if (got.empty() && want.empty()) continue;
      std::printf("%s rank %d: deferred %lld bytes in %zu calls, plain %lld bytes in %zu calls\n", group.c_str(), r,
                  static_cast<long long>(deferred->log->Bytes(group, r)), got.size(),
                  static_cast<long long>(plain->log->Bytes(group, r)), want.size());
      EXPECT_EQ(deferred->log->Bytes(group, r), plain->log->Bytes(group, r)) << group << " rank " << r;
      ASSERT_EQ(got.size(), want.size()) << group << " rank " << r;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << group << " rank " << r << " call " << i << ": " << got[i].ToString()
                                   << " vs " << want[i].ToString();
        EXPECT_EQ(got[i].shape.size(), 2u) << "a call of rank " << got[i].shape.size() << ": " << got[i].ToString();
      }
    }
  }
  for (int r = 0; r < layout.tp; ++r) {
    ASSERT_EQ(deferred->logits[r].size(), 2u);
    for (size_t step = 0; step < 2; ++step) {
      EXPECT_TRUE(SameBits(deferred->logits[r][step], plain->logits[r][step])) << "rank " << r << " step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeferredFinalizeBytes,
                         ::testing::Values(Layout{2, 1, boundary::ReductionPolicy::kAr},
                                           Layout{2, 2, boundary::ReductionPolicy::kAr},
                                           Layout{2, 2, boundary::ReductionPolicy::kAuto}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           std::string p = boundary::ReductionPolicyName(info.param.policy);
                           return absl::StrCat("tp", info.param.tp, "_dp", info.param.attn_dp, "_", p);
                         });

}  // namespace
}  // namespace seam::models

// Qwen3 / Qwen3-MoE's two-batch-overlap forward on CPU ranks over real Gloo,
// at TP 2 with and without attention DP, in every interleaving and for
// uneven splits (a microbatch empty on a DP group or everywhere, odd row
// counts): its logits equal bit for bit those of the two microbatches run
// one after the other through the ordinary Forward (with defer_moe_finalize
// off: the unfused finalize TBO's CompleteNow also runs), and the unsplit
// Forward's within kTolerance.
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "seam/boundary/two_batch.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"
#include "seam/models/qwen3_model.h"
#include "seam/testing/rank_rendezvous.h"
#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::models {
namespace {

using boundary::TboOrder;

// Against the unsplit batch: OpenBLAS's sgemm blocks a matmul of a different
// row count differently (the same-rank runs of runtime's kv_decode_test
// differ the same way), so the fp32 logits agree to this relative error;
// against the same microbatches run one by one they agree bit for bit.
constexpr double kTolerance = 1e-5;

struct Case {
  bool moe = true;
  int tp = 2, attn_dp = 1;
  std::vector<std::vector<int>> lengths;  // sequence lengths of each DP group
  std::vector<int> a_sequences;           // A's sequences in each DP group
  TboOrder order = TboOrder::kAlternate;
  bool all_logits = true;
};

// Runs the case on tp Gloo rank threads; OK when every rank's TBO logits
// equal its ordinary logits bit for bit.
absl::Status RunCase(const Case& c) {
  auto checkpoint = weights::Checkpoint::Open(testing::TinyCheckpointDir(c.moe));
  if (!checkpoint.ok()) return checkpoint.status();
  seam::testing::TempDir dir("seam_tbo_model");
  auto store = comm::MakeFileStore(dir.path());
  if (!store.ok()) return store.status();
  const comm::CommunicatorFactory factory = comm::MakeGlooGroupFactory(*store, comm::CommOptions{absl::Seconds(30)});
  std::vector<int64_t> dp_rows, a_rows;
  std::vector<StepInput> inputs;
  for (size_t d = 0; d < c.lengths.size(); ++d) {
    StepInput in;
    in.all_logits = c.all_logits;
    int64_t rows = 0, a = 0;
    for (size_t s = 0; s < c.lengths[d].size(); ++s) {
      in.sequences.push_back(SequenceStep{100 * d + s, testing::PromptTokens(7 * d + s, c.lengths[d][s], 128), 0});
      rows += c.lengths[d][s];
      if (static_cast<int>(s) < c.a_sequences[d]) a += c.lengths[d][s];
    }
    inputs.push_back(in);
    dp_rows.push_back(rows);
    a_rows.push_back(a);
  }
  std::vector<absl::Status> results(c.tp);
  std::vector<std::thread> threads;
  seam::testing::RankRendezvous teardown(c.tp);
  for (int r = 0; r < c.tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::ProcessGroups> groups;  // torn down once every rank is done
      seam::testing::ArriveOnExit done(teardown);
      results[r] = [&]() -> absl::Status {
        SEAM_ASSIGN_OR_RETURN(groups, comm::ProcessGroups::Create(comm::Topology{c.tp, c.attn_dp, 1}, r, factory));
        SEAM_ASSIGN_OR_RETURN(boundary::Topology topology, boundary::Topology::Make(c.tp, c.attn_dp, r));
        ModelOptions options{topology, boundary::ReductionPolicy::kAr, DType::kF32};
        options.defer_moe_finalize = false;
        SEAM_ASSIGN_OR_RETURN(auto model, Qwen3Model::Load(**checkpoint, options));
        const boundary::StageComms comms{&groups->tp(), &groups->attn_tp(), &groups->attn_dp()};
        const StepInput& input = inputs[topology.dp_rank()];
        SEAM_ASSIGN_OR_RETURN(auto cache_a, model->MakeCache({}));
        SEAM_ASSIGN_OR_RETURN(auto cache_b, model->MakeCache({}));
        boundary::ForwardBatch plain(1, boundary::BatchVariant::kOrdinary, topology, dp_rows);
        plain.comms = comms;
        SEAM_ASSIGN_OR_RETURN(Tensor want, model->Forward(plain, input, *cache_a));
        boundary::ForwardBatch split(2, boundary::BatchVariant::kOrdinary, topology, dp_rows);
        split.comms = comms;
        TwoBatchStep tbo;
        tbo.a_sequences = c.a_sequences[topology.dp_rank()];
        tbo.a_dp_rows = a_rows;
        tbo.order = c.order;
        SEAM_ASSIGN_OR_RETURN(Tensor got, model->ForwardTwoBatch(split, input, *cache_b, tbo));
        // The two microbatches one after the other through the ordinary forward.
        StepInput parts[2] = {input, input};
        parts[0].sequences.resize(tbo.a_sequences);
        parts[1].sequences.erase(parts[1].sequences.begin(), parts[1].sequences.begin() + tbo.a_sequences);
        std::vector<int64_t> b_rows(dp_rows.size());
        for (size_t d = 0; d < dp_rows.size(); ++d) b_rows[d] = dp_rows[d] - a_rows[d];
        SEAM_ASSIGN_OR_RETURN(auto cache_c, model->MakeCache({}));
        Tensor each[2];
        for (int i = 0; i < 2; ++i) {
          const std::vector<int64_t>& rows = i == 0 ? a_rows : b_rows;
          int64_t total = 0;
          for (int64_t r : rows) total += r;
          if (total == 0) continue;  // an empty microbatch everywhere
          boundary::ForwardBatch part(3 + i, boundary::BatchVariant::kOrdinary, topology, rows);
          part.comms = comms;
          SEAM_ASSIGN_OR_RETURN(each[i], model->Forward(part, parts[i], *cache_c));
        }
        if (want.defined() != got.defined()) return absl::InternalError("one forward returned logits, one not");
        if (!want.defined()) return absl::OkStatus();
        SEAM_ASSIGN_OR_RETURN(const Tensor one_by_one, boundary::MergeRows(each[0], each[1]));
        if (one_by_one.shape() != got.shape() || one_by_one.ToFloats() != got.ToFloats()) {
          return absl::InternalError(absl::StrCat("TBO logits differ from the microbatches run one by one (max ",
                                                  "relative error ", testing::MaxRelativeError(got, one_by_one), ")"));
        }
        if (want.shape() != got.shape() || testing::MaxRelativeError(got, want) > kTolerance) {
          return absl::InternalError(absl::StrCat("TBO logits ", ShapeToString(got.shape()), " differ from ",
                                                  ShapeToString(want.shape()), " (max relative error ",
                                                  testing::MaxRelativeError(got, want), ")"));
        }
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.tp; ++r) {
    if (!results[r].ok()) return absl::Status(results[r].code(), absl::StrCat("rank ", r, ": ", results[r].message()));
  }
  return absl::OkStatus();
}

TEST(TwoBatchModel, MoeAtTp2EqualsTheOrdinaryForwardInEveryOrder) {
  for (TboOrder order : {TboOrder::kAlternate, TboOrder::kAlternateBFirst, TboOrder::kStaggered,
                         TboOrder::kSequential}) {
    const absl::Status st = RunCase(Case{true, 2, 1, {{9, 4, 7}}, {1}, order});
    EXPECT_TRUE(st.ok()) << boundary::TboOrderName(order) << ": " << st;
  }
}

TEST(TwoBatchModel, DenseAndLastRowLogits) {
  const absl::Status dense = RunCase(Case{false, 2, 1, {{5, 11}}, {1}, TboOrder::kStaggered, false});
  EXPECT_TRUE(dense.ok()) << dense;
  const absl::Status b_empty = RunCase(Case{true, 2, 1, {{5, 11}}, {2}, TboOrder::kAlternate, false});
  EXPECT_TRUE(b_empty.ok()) << b_empty;
}

TEST(TwoBatchModel, AttentionDpWithAMicrobatchEmptyOnOneGroup) {
  const absl::Status st = RunCase(Case{true, 2, 2, {{9, 3}, {6}}, {1, 0}, TboOrder::kAlternate});
  EXPECT_TRUE(st.ok()) << st;
  const absl::Status dense = RunCase(Case{false, 2, 2, {{9, 3}, {5, 2}}, {1, 1}, TboOrder::kAlternateBFirst});
  EXPECT_TRUE(dense.ok()) << dense;
}

TEST(TwoBatchModel, RefusesASplitThatDoesNotFitTheStep) {
  auto checkpoint = weights::Checkpoint::Open(testing::TinyCheckpointDir(false));
  ASSERT_TRUE(checkpoint.ok());
  ModelOptions options{*boundary::Topology::Make(1, 1, 0), boundary::ReductionPolicy::kAr, DType::kF32};
  auto model = Qwen3Model::Load(**checkpoint, options);
  ASSERT_TRUE(model.ok());
  auto cache = (*model)->MakeCache({});
  ASSERT_TRUE(cache.ok());
  StepInput input{{SequenceStep{1, testing::PromptTokens(1, 4, 128), 0}, SequenceStep{2, {3, 4}, 0}}, true};
  boundary::ForwardBatch batch(1, boundary::BatchVariant::kOrdinary, options.topology, {6});
  TwoBatchStep tbo;
  tbo.a_sequences = 1;
  tbo.a_dp_rows = {3};
  const auto bad = (*model)->ForwardTwoBatch(batch, input, **cache, tbo);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("first 1 sequences hold 4"), std::string::npos) << bad.status();
  const TwoBatchStep balanced = BalancedTwoBatchStep(input);
  EXPECT_EQ(balanced.a_sequences, 1);
  EXPECT_EQ(balanced.a_dp_rows, std::vector<int64_t>{4});
}

// On one GPU (TP 1, f32): each microbatch on a CUDA stream of its own, in
// every order; the logits equal A and B run one by one through Forward bit
// for bit (the same kernels on the same rows). Skips without a GPU.
TEST(TwoBatchModelCuda, TwoStreamsEqualTheMicrobatchesOneByOne) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  auto checkpoint = weights::Checkpoint::Open(testing::TinyCheckpointDir(true));
  ASSERT_TRUE(checkpoint.ok());
  const Device gpu = Device::CUDA(0);
  ASSERT_TRUE(UseDevice(gpu).ok());
  auto caller = CudaStream::Create(gpu), s0 = CudaStream::Create(gpu), s1 = CudaStream::Create(gpu);
  ASSERT_TRUE(caller.ok() && s0.ok() && s1.ok());
  kernels::ScopedStream on(caller->handle());
  ModelOptions options{*boundary::Topology::Make(1, 1, 0), boundary::ReductionPolicy::kAr, DType::kF32};
  options.device = gpu;
  options.defer_moe_finalize = false;
  auto model = Qwen3Model::Load(**checkpoint, options);
  ASSERT_TRUE(model.ok()) << model.status();
  const StepInput input{{SequenceStep{1, testing::PromptTokens(3, 19, 128), 0},
                         SequenceStep{2, testing::PromptTokens(4, 6, 128), 0},
                         SequenceStep{3, testing::PromptTokens(5, 13, 128), 0}},
                        true};
  const TwoBatchStep balanced = BalancedTwoBatchStep(input);
  StepInput parts[2] = {input, input};
  parts[0].sequences.resize(balanced.a_sequences);
  parts[1].sequences.erase(parts[1].sequences.begin(), parts[1].sequences.begin() + balanced.a_sequences);
  auto cache = (*model)->MakeCache({});
  ASSERT_TRUE(cache.ok());
  Tensor each[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t rows = i == 0 ? balanced.a_dp_rows[0] : 38 - balanced.a_dp_rows[0];
    boundary::ForwardBatch part(1 + i, boundary::BatchVariant::kOrdinary, options.topology, {rows});
    auto logits = (*model)->Forward(part, parts[i], **cache);
    ASSERT_TRUE(logits.ok()) << logits.status();
    each[i] = *logits->To(Device::CPU());
    for (const SequenceStep& s : parts[i].sequences) ASSERT_TRUE((*cache)->Free(s.sequence).ok());
  }
  const Tensor want = *boundary::MergeRows(each[0], each[1]);
  for (TboOrder order : {TboOrder::kAlternate, TboOrder::kAlternateBFirst, TboOrder::kStaggered,
                         TboOrder::kSequential}) {
    TwoBatchStep tbo = balanced;
    tbo.order = order;
    tbo.streams[0] = s0->handle();
    tbo.streams[1] = s1->handle();
    boundary::ForwardBatch batch(9, boundary::BatchVariant::kOrdinary, options.topology, {38});
    auto got = (*model)->ForwardTwoBatch(batch, input, **cache, tbo);
    ASSERT_TRUE(got.ok()) << got.status();
    const Tensor host = *got->To(Device::CPU());
    EXPECT_EQ(host.ToFloats(), want.ToFloats()) << boundary::TboOrderName(order);
    for (const SequenceStep& s : input.sequences) ASSERT_TRUE((*cache)->Free(s.sequence).ok());
  }
}

}  // namespace
}  // namespace seam::models

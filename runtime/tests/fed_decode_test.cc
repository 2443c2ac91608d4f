// Decode steps fed on the device (StageGroup::StepFed): a run of steps, each
// enqueued before the previous one's tokens are read and fed its tokens on
// the GPU, chooses exactly the tokens of StepPiece steps fed through the
// host, greedy and sampled, at a bucket's full size and padded; a stale or
// mismatched feed is refused; groups that cannot feed (on the host, or
// with attention-DP groups) say so. The same at TP 2 (TP rank 0 chooses and
// broadcasts). GPU tests skip without enough GPUs.
#include <map>
#include <memory>
#include <ostream>
#include <vector>

#include <gtest/gtest.h>

#include "seam/core/device_memory.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::PromptTokens;
using testing::TinyCheckpointDir;

constexpr int kSteps = 12;

StageGroupOptions CudaOptions(DType dtype) {
  StageGroupOptions o;
  o.device = Device::Kind::kCUDA;
  o.model.dtype = dtype;
  o.cache.dtype = dtype;
  o.kv.cache_bytes = int64_t{64} << 20;
  o.graph_buckets = {1, 2, 4, 8};
  o.graph_max_context = 64;
  return o;
}

// Greedy rows, and with `sampled` every other row drawn at temperature 0.8.
std::vector<TokenChoice> Choices(int sequences, int step, bool sampled) {
  std::vector<TokenChoice> choices(sequences);
  for (int i = 0; i < sequences; ++i) {
    choices[i].params.temperature = sampled && i % 2 == 1 ? 0.8f : 0.0f;
    choices[i].params.seed = 17 + i;
    choices[i].step = step;
  }
  return choices;
}

// Prefills `n` prompts (sequence ids from 1) with chosen tokens; returns each one's first token.
std::vector<int32_t> Prefill(StageGroup& group, int n, bool sampled) {
  std::vector<models::SequenceStep> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(models::SequenceStep{uint64_t(i + 1), PromptTokens(40 + i, 9 + i, 128), 0});
  const std::vector<TokenChoice> choices = Choices(n, 0, sampled);
  absl::StatusOr<PieceOutput> out = group.StepPiece(prompts, false, {}, &choices);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->tokens : std::vector<int32_t>(n, 0);
}

std::vector<models::SequenceStep> DecodeStep(const std::vector<int32_t>& tokens, int step) {
  std::vector<models::SequenceStep> steps;
  for (size_t i = 0; i < tokens.size(); ++i) {
    steps.push_back(models::SequenceStep{uint64_t(i + 1), {tokens[i]}, int64_t(9 + i + step)});
  }
  return steps;
}

// kSteps decode steps through the host (StepPiece): the tokens of each.
std::vector<std::vector<int32_t>> ThroughTheHost(StageGroup& group, int n, bool sampled) {
  std::vector<std::vector<int32_t>> chosen = {Prefill(group, n, sampled)};
  for (int k = 0; k < kSteps; ++k) {
    const std::vector<TokenChoice> choices = Choices(n, k + 1, sampled);
    absl::StatusOr<PieceOutput> out = group.StepPiece(DecodeStep(chosen.back(), k), false, {}, &choices);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) break;
    chosen.push_back(out->tokens);
  }
  return chosen;
}

// The same steps fed on the device, each enqueued before the previous one is read.
std::vector<std::vector<int32_t>> OnTheDevice(StageGroup& group, int n, bool sampled) {
  std::vector<std::vector<int32_t>> chosen = {Prefill(group, n, sampled)};
  std::vector<FedStep> fed;
  for (int k = 0; k < kSteps; ++k) {
    // Tokens of step 0 come from the host; later ones' are placeholders the feed replaces.
    const std::vector<int32_t> tokens = k == 0 ? chosen.back() : std::vector<int32_t>(n, 0);
    EXPECT_TRUE(group.CanStepFed(DecodeStep(tokens, k)));
    absl::StatusOr<FedStep> step =
        group.StepFed(DecodeStep(tokens, k), Choices(n, k + 1, sampled), fed.empty() ? nullptr : &fed.back());
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) break;
    fed.push_back(*step);
    if (k > 0) {
      absl::StatusOr<std::vector<int32_t>> previous = group.FedTokens(fed[k - 1]);
      EXPECT_TRUE(previous.ok()) << previous.status();
      if (previous.ok()) chosen.push_back(*previous);
    }
  }
  absl::StatusOr<std::vector<int32_t>> last = group.FedTokens(fed.back());
  EXPECT_TRUE(last.ok()) << last.status();
  if (last.ok()) chosen.push_back(*last);
  return chosen;
}

struct FedCase {
  DType dtype;
  int sequences;  // 8: a whole bucket; 3: padded to 4
  bool sampled;
};

void PrintTo(const FedCase& c, std::ostream* os) {
  *os << (c.dtype == DType::kF32 ? "f32" : "bf16") << ", " << c.sequences << " sequences, "
      << (c.sampled ? "sampled" : "greedy");
}

class FedDecode : public ::testing::TestWithParam<FedCase> {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible; fed decode tests skipped";
  }
};

// The tokens of steps through the host, then of the same steps fed on the
// device, each on a fresh group of `tp` ranks (one at a time: both use the same GPUs).
void ExpectFedEqualsHost(const FedCase& c, int tp) {
  StageGroupOptions o = CudaOptions(c.dtype);
  o.fed_decode_max_tp = tp;
  std::vector<std::vector<int32_t>> want, got;
  {
    auto host = StageGroup::Create(TinyCheckpointDir(false), tp, 1, boundary::ReductionPolicy::kAuto, o);
    ASSERT_TRUE(host.ok()) << host.status();
    want = ThroughTheHost(**host, c.sequences, c.sampled);
  }
  auto device = StageGroup::Create(TinyCheckpointDir(false), tp, 1, boundary::ReductionPolicy::kAuto, o);
  ASSERT_TRUE(device.ok()) << device.status();
  got = OnTheDevice(**device, c.sequences, c.sampled);
  ASSERT_EQ(want.size(), size_t{kSteps + 1});
  EXPECT_EQ(got, want);
  const GraphDecodeStats stats = (*device)->GraphStats();
  const int64_t bucket = c.sequences == 8 ? 8 : 4;
  EXPECT_EQ(stats.replays, (std::map<int64_t, int64_t>{{bucket, kSteps}})) << stats.ToString();
}

TEST_P(FedDecode, ChoosesTheTokensOfStepsFedThroughTheHost) { ExpectFedEqualsHost(GetParam(), 1); }

TEST_P(FedDecode, ChoosesTheTokensOfStepsFedThroughTheHost_Tp2) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP 2 needs two GPUs (one NCCL rank per GPU)";
  ExpectFedEqualsHost(GetParam(), 2);
}

INSTANTIATE_TEST_SUITE_P(Cases, FedDecode,
                         ::testing::Values(FedCase{DType::kF32, 8, false}, FedCase{DType::kBF16, 8, false},
                                           FedCase{DType::kBF16, 3, false}, FedCase{DType::kF32, 3, true},
                                           FedCase{DType::kBF16, 8, true}),
                         [](const auto& info) {
                           return absl::StrCat(info.param.dtype == DType::kF32 ? "F32" : "Bf16", "_",
                                               info.param.sequences, info.param.sampled ? "_Sampled" : "_Greedy");
                         });

TEST(FedDecodeErrors, StaleAndMismatchedFeedsAreRefused) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  auto group = StageGroup::Create(TinyCheckpointDir(false), 1, 1, boundary::ReductionPolicy::kAuto,
                                  CudaOptions(DType::kF32));
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<int32_t> tokens = Prefill(**group, 2, false);
  absl::StatusOr<FedStep> first = (*group)->StepFed(DecodeStep(tokens, 0), Choices(2, 1, false), nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  // The same sequences in another order.
  std::vector<models::SequenceStep> swapped = DecodeStep({0, 0}, 1);
  std::swap(swapped[0], swapped[1]);
  absl::StatusOr<FedStep> refused = (*group)->StepFed(swapped, Choices(2, 2, false), &*first);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("other sequences"), std::string::npos) << refused.status();
  // A ticket of a slot taken again is stale.
  FedStep stale = *first;
  stale.generation += 1000;
  EXPECT_EQ((*group)->FedTokens(stale).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::vector<int32_t>> read = (*group)->FedTokens(*first);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 2u);
}

// With two attention-DP groups each group's tokens would have their own
// chooser: such groups do not feed, and their steps run as before.
TEST(FedDecodeErrors, AttentionDpGroupsDoNotFeed) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "attention DP 2 needs two GPUs";
  StageGroupOptions o = CudaOptions(DType::kF32);
  o.fed_decode_max_tp = 2;
  auto group = StageGroup::Create(TinyCheckpointDir(false), 2, 2, boundary::ReductionPolicy::kAuto, o);
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<int32_t> tokens = Prefill(**group, 2, false);
  EXPECT_FALSE((*group)->CanStepFed(DecodeStep(tokens, 0)));
  absl::StatusOr<FedStep> fed = (*group)->StepFed(DecodeStep(tokens, 0), Choices(2, 1, false), nullptr);
  EXPECT_EQ(fed.status().code(), absl::StatusCode::kFailedPrecondition) << fed.status();
}

// At the default fed_decode_max_tp a TP 2 group does not feed.
TEST(FedDecodeErrors, TpGroupsFeedOnlyWhenAllowed) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "TP 2 needs two GPUs";
  auto group = StageGroup::Create(TinyCheckpointDir(false), 2, 1, boundary::ReductionPolicy::kAuto,
                                  CudaOptions(DType::kF32));
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<int32_t> tokens = Prefill(**group, 2, false);
  EXPECT_FALSE((*group)->CanStepFed(DecodeStep(tokens, 0)));
}

// On the host nothing is fed: StepFed refuses and StepPiece runs as before.
TEST(FedDecodeOnHost, CpuGroupsCannotFeed) {
  StageGroupOptions o;
  o.graph_buckets = {1, 2, 4};
  o.kv.cache_bytes = int64_t{16} << 20;
  auto group = StageGroup::Create(TinyCheckpointDir(false), 1, 1, boundary::ReductionPolicy::kAuto, o);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE((*group)->Step({models::SequenceStep{1, {3, 4}, 0}}, false).ok());
  const std::vector<models::SequenceStep> decode = {models::SequenceStep{1, {5}, 2}};
  EXPECT_FALSE((*group)->CanStepFed(decode));
  absl::StatusOr<FedStep> fed = (*group)->StepFed(decode, Choices(1, 1, false), nullptr);
  EXPECT_EQ(fed.status().code(), absl::StatusCode::kFailedPrecondition) << fed.status();
  EXPECT_TRUE((*group)->Step(decode, false).ok());
}

}  // namespace
}  // namespace seam::runtime

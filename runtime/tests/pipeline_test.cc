// Pipeline pieces of the 4-layer Qwen3 and Qwen3-MoE models: the stack cut
// into 2 ([0,2)+[2,4)) or 3 ([0,1)+[1,3)+[3,4)) stage groups handing the
// stream over with StepPiece, against the unsplit group at the same TP.
// A pure pipeline split must be bitwise identical to no split: every piece
// runs the same kernels on the same rows with the same reductions, and the
// handoff carries the stream's exact fp32 values, so logits must match bit for bit.
#include <cstring>
#include <memory>
#include <tuple>

#include <gtest/gtest.h>

#include "seam/runtime/stage_group.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::FourLayerCheckpointDir;
using testing::PromptTokens;

constexpr int kDecodeSteps = 3;

bool BitEqual(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<float> x = a.ToFloats(), y = b.ToFloats();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

int32_t Argmax(const Tensor& logits) {
  const std::vector<float> v = logits.ToFloats();
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > v[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

// Stage groups for layers [cuts[i], cuts[i+1]), run one after another on each step.
class Pipeline {
 public:
  static std::unique_ptr<Pipeline> Make(bool moe, int tp, int attn_dp, const std::vector<int>& cuts) {
    auto p = std::make_unique<Pipeline>();
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      StageGroupOptions options;
      options.model.first_layer = cuts[i];
      options.model.end_layer = cuts[i + 1];
      auto group = StageGroup::Create(FourLayerCheckpointDir(moe), tp, attn_dp, boundary::ReductionPolicy::kAuto,
                                      options);
      EXPECT_TRUE(group.ok()) << group.status();
      if (!group.ok()) return nullptr;
      p->pieces.push_back(std::move(*group));
    }
    return p;
  }

  absl::StatusOr<std::vector<Tensor>> Step(const std::vector<models::SequenceStep>& sequences, bool all_logits) {
    std::vector<boundary::PipelineTensors> handoff;
    for (auto& piece : pieces) {
      absl::StatusOr<PieceOutput> out = piece->StepPiece(sequences, all_logits, handoff);
      if (!out.ok()) return out.status();
      for (const boundary::PipelineTensors& t : out->handoff) {
        EXPECT_TRUE(t.hidden.is_contiguous() && t.hidden.device().is_cpu());
      }
      if (piece->is_last_piece()) return std::move(out->logits);
      handoff = std::move(out->handoff);
    }
    return absl::InternalError("no last piece");
  }

  std::vector<std::unique_ptr<StageGroup>> pieces;
};

struct Outcome {
  std::vector<std::vector<Tensor>> logits;     // per step, per sequence
  std::vector<std::vector<int32_t>> greedy;    // per sequence
};

// Prefill of three prompts (every token's logits), then greedy decode steps.
Outcome RunPipeline(bool moe, int tp, int attn_dp, const std::vector<int>& cuts) {
  Outcome run;
  auto pipeline = Pipeline::Make(moe, tp, attn_dp, cuts);
  if (pipeline == nullptr) return run;
  const std::vector<std::vector<int32_t>> prompts{PromptTokens(1, 5, 128), PromptTokens(2, 9, 128),
                                                  PromptTokens(3, 3, 128)};
  std::vector<models::SequenceStep> step;
  for (size_t i = 0; i < prompts.size(); ++i) step.push_back(models::SequenceStep{100 + i, prompts[i], 0, static_cast<int>(i) % attn_dp});
  run.greedy.resize(prompts.size());
  for (int s = 0; s <= kDecodeSteps; ++s) {
    auto logits = pipeline->Step(step, /*all_logits=*/s == 0);
    EXPECT_TRUE(logits.ok()) << "step " << s << ": " << logits.status();
    if (!logits.ok()) return run;
    run.logits.push_back(*logits);
    for (size_t i = 0; i < step.size(); ++i) {
      const Tensor& l = (*logits)[i];
      const int32_t next = Argmax(l.Rows(l.rows() - 1, 1).Clone());
      run.greedy[i].push_back(next);
      step[i].start += static_cast<int64_t>(step[i].tokens.size());
      step[i].tokens = {next};
    }
  }
  return run;
}

using Param = std::tuple<bool, std::pair<int, int>>;
class PipelineSplit : public ::testing::TestWithParam<Param> {};

TEST_P(PipelineSplit, SplitLogitsAreBitIdenticalToTheUnsplitModel) {
  const auto [moe, layout] = GetParam();
  const auto [tp, attn_dp] = layout;
  const Outcome whole = RunPipeline(moe, tp, attn_dp, {0, 4});
  ASSERT_EQ(whole.logits.size(), static_cast<size_t>(kDecodeSteps + 1));
  for (const std::vector<int>& cuts : {std::vector<int>{0, 2, 4}, std::vector<int>{0, 1, 3, 4}}) {
    const Outcome split = RunPipeline(moe, tp, attn_dp, cuts);
    ASSERT_EQ(split.logits.size(), whole.logits.size()) << ::testing::PrintToString(cuts);
    for (size_t s = 0; s < whole.logits.size(); ++s) {
      ASSERT_EQ(split.logits[s].size(), whole.logits[s].size());
      for (size_t i = 0; i < whole.logits[s].size(); ++i) {
        EXPECT_TRUE(BitEqual(split.logits[s][i], whole.logits[s][i]))
            << "cuts " << ::testing::PrintToString(cuts) << " step " << s << " sequence " << i;
      }
    }
    EXPECT_EQ(split.greedy, whole.greedy) << ::testing::PrintToString(cuts);
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [moe, layout] = info.param;
  return std::string(moe ? "moe" : "dense") + "_tp" + std::to_string(layout.first) + "_dp" +
         std::to_string(layout.second);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineSplit,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1),
                                                              std::make_pair(2, 2))),
                         Name);

}  // namespace
}  // namespace seam::runtime

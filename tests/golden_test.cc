// The external oracle: Hugging Face transformers' fp32 logits for small random
// Qwen3 and Qwen3-MoE checkpoints (tests/fixtures/golden, made by
// tools/make_golden.py), for seam's own random Nemotron-H checkpoint
// (made by tools/make_golden_nemotron_h.py), and for checkpoints in
// transformers' own layout (tools/make_golden_layouts.py: tied Qwen3 and
// Qwen3-MoE, a tied config whose file holds its own lm_head, Nemotron-H as
// transformers 5 saves it, untied and tied with its own lm_head; LongCat-Flash
// built and saved by transformers 5, tools/make_golden_longcat_flash.py). seam must match them within 1e-4
// relative (max |seam - hf| <= 1e-4 · max |hf| per logits tensor: both sides
// are fp32, differing only in summation order and transcendental
// implementations) and pick the same greedy tokens, at TP 1, 2 and 4, with
// attention DP, and (Nemotron-H) split into 1, 2 or 3 pipeline pieces, one
// cut between two Mamba layers.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "seam/runtime/stage_group.h"
#include "seam/core/status.h"
#include "seam/weights/safetensors.h"
#include "piece_pipeline.h"

namespace seam {
namespace {

double RelativeError(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = got.ToFloats(), b = want.ToFloats();
  if (a.size() != b.size()) return INFINITY;
  double max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[i])));
  }
  return max_abs / max_ref;
}

int32_t ArgmaxOfRow(const Tensor& logits, int64_t row) {
  const std::vector<float> v = logits.ToFloats();
  const int64_t vocab = logits.dim(-1);
  return static_cast<int32_t>(std::max_element(v.begin() + row * vocab, v.begin() + (row + 1) * vocab) -
                              (v.begin() + row * vocab));
}

Tensor Get(const weights::SafetensorsFile& file, const std::string& name) {
  auto t = file.View(name);
  SEAM_CHECK_MSG(t.ok(), t.status().ToString());
  return *t;
}

// The layer cuts of a `pp`-piece split of the 8-layer Nemotron-H fixture
// (pattern MM*--M*-): PP 2 cuts between its two Mamba layers, PP 3 between a
// Mamba layer and attention and between an MLP and a Mamba layer. The
// layout fixtures' PP 2 cuts after their first layer (the last piece of a
// tied one reads the embedding table as its head).
std::vector<int> Cuts(int pp, int layers) {
  if (pp == 2) return {0, 1, layers};
  if (pp == 3) return {0, 2, 5, layers};
  return {0, layers};
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

using Param = std::tuple<std::string, std::pair<int, int>, int>;
class Golden : public ::testing::TestWithParam<Param> {};

TEST_P(Golden, LogitsAndGreedyTokensMatchTransformers) {
  const auto& [arch, layout, pp] = GetParam();
  const std::string dir = std::string(SEAM_FIXTURES_DIR) + "/golden/" + arch;
  if (!Exists(dir + "/golden.safetensors")) {
    GTEST_SKIP() << dir << "/golden.safetensors does not exist yet: make it with transformers, "
                 << "python3 tools/make_golden_" << arch << ".py --dir tests/fixtures/golden/" << arch
                 << " (tests/fixtures/golden/README.md)";
  }
  auto golden = weights::SafetensorsFile::Open(dir + "/golden.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto config = weights::LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  auto group = std::make_unique<testing::PiecePipeline>();
  const absl::Status opened =
      group->Open(dir, layout.first, layout.second, Cuts(pp, static_cast<int>(config->num_hidden_layers)));
  ASSERT_TRUE(opened.ok()) << opened;

  // All prompts prefilled in one batch (different lengths), every position's logits.
  std::vector<models::SequenceStep> batch;
  for (int i = 0; i < 4; ++i) {
    Tensor prompt = Get(**golden, "prompt_" + std::to_string(i));
    batch.push_back({static_cast<uint64_t>(i + 1),
                     std::vector<int32_t>(prompt.data<int32_t>(), prompt.data<int32_t>() + prompt.numel()), 0});
  }
  auto prefill = group->Step(batch, true);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  double worst = 0;
  for (int i = 0; i < 4; ++i) {
    const double err = RelativeError((*prefill)[i], Get(**golden, "prefill_logits_" + std::to_string(i)));
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-4) << "prefill of prompt " << i;
  }
  // Greedy decode: each step must choose transformers' token from matching logits.
  std::vector<Tensor> decode_logits, decode_tokens;
  for (int i = 0; i < 4; ++i) {
    decode_logits.push_back(Get(**golden, "decode_logits_" + std::to_string(i)));
    decode_tokens.push_back(Get(**golden, "decode_tokens_" + std::to_string(i)));
    EXPECT_EQ(ArgmaxOfRow((*prefill)[i], (*prefill)[i].rows() - 1), decode_tokens[i].data<int32_t>()[0]);
  }
  const int64_t steps = decode_tokens[0].numel();
  for (int64_t k = 1; k < steps; ++k) {
    for (int i = 0; i < 4; ++i) {
      batch[i].start += static_cast<int64_t>(batch[i].tokens.size());
      batch[i].tokens = {decode_tokens[i].data<int32_t>()[k - 1]};
    }
    auto step = group->Step(batch, false);
    ASSERT_TRUE(step.ok()) << step.status();
    for (int i = 0; i < 4; ++i) {
      const double err = RelativeError((*step)[i], decode_logits[i].Rows(k, 1));
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-4) << "decode step " << k << " of prompt " << i;
      EXPECT_EQ(ArgmaxOfRow((*step)[i], 0), decode_tokens[i].data<int32_t>()[k])
          << "greedy token of step " << k << " of prompt " << i;
    }
  }
  std::printf("%s tp=%d attn_dp=%d pp=%d: max relative logits error vs transformers %.3g\n", arch.c_str(),
              layout.first, layout.second, pp, worst);
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [arch, layout, pp] = info.param;
  return arch + "_tp" + std::to_string(layout.first) + "_dp" + std::to_string(layout.second) +
         (pp > 1 ? "_pp" + std::to_string(pp) : "");
}

const auto kLayouts = ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1), std::make_pair(4, 1),
                                        std::make_pair(2, 2), std::make_pair(4, 2));

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Combine(::testing::Values("qwen3", "qwen3_moe"), kLayouts, ::testing::Values(1)),
                         Name);
INSTANTIATE_TEST_SUITE_P(TransformersLayouts, Golden,
                         ::testing::Combine(::testing::Values("qwen3_tied", "qwen3_moe_tied", "qwen3_tied_own_head",
                                                              "nemotron_h_hf", "nemotron_h_hf_tied"),
                                            ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1),
                                                              std::make_pair(2, 2)),
                                            ::testing::Values(1, 2)),
                         Name);
// LongCat-Flash as transformers 5 saves it (tools/make_golden_longcat_flash.py):
// the MoE's branch on every split, and a pipeline cut between its two layers.
INSTANTIATE_TEST_SUITE_P(LongcatFlash, Golden,
                         ::testing::Combine(::testing::Values("longcat_flash"),
                                            ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1),
                                                              std::make_pair(4, 1), std::make_pair(2, 2)),
                                            ::testing::Values(1, 2)),
                         Name);
INSTANTIATE_TEST_SUITE_P(NemotronH, Golden,
                         ::testing::Combine(::testing::Values("nemotron_h"), kLayouts, ::testing::Values(1, 2, 3)),
                         Name);

}  // namespace
}  // namespace seam

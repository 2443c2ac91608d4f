// External oracle: logits of Hugging Face transformers for a checkpoint,
// computed elsewhere (the GPU machine has transformers). Set
// SEAM_HF_ORACLE_DIR to a directory holding, for <name> in {dense, moe}, the
// checkpoint <name>/ and <name>.safetensors with "input_ids" (i32 [T]) and
// "logits" (f32 [T, vocab]) of one forward over input_ids. Skipped when unset.
#include <cstdlib>

#include <gtest/gtest.h>

#include "seam/models/stage_group.h"
#include "seam/weights/safetensors.h"
#include "tiny_checkpoint.h"

namespace seam::models {
namespace {

class HfOracle : public ::testing::TestWithParam<std::tuple<const char*, std::pair<int, int>>> {};

TEST_P(HfOracle, LogitsMatchTransformersWithin1e4) {
  const char* root = std::getenv("SEAM_HF_ORACLE_DIR");
  if (root == nullptr) GTEST_SKIP() << "SEAM_HF_ORACLE_DIR is not set";
  const auto [name, layout] = GetParam();
  const std::string base = std::string(root) + "/" + name;
  auto file = weights::SafetensorsFile::Open(base + ".safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  auto ids = (*file)->View("input_ids");
  auto want = (*file)->View("logits");
  ASSERT_TRUE(ids.ok() && want.ok());
  auto group = StageGroup::Create(base, layout.first, layout.second, boundary::ReductionPolicy::kAuto);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<int32_t> tokens(ids->data<int32_t>(), ids->data<int32_t>() + ids->numel());
  auto got = (*group)->Step({SequenceStep{1, tokens, 0}}, true);
  ASSERT_TRUE(got.ok()) << got.status();
  const double err = testing::MaxRelativeError((*got)[0], *want);
  std::printf("%s tp=%d attn_dp=%d: max relative logit error vs transformers = %.3g\n", name, layout.first,
              layout.second, err);
  EXPECT_LE(err, 1e-4);
}

std::string Name(const ::testing::TestParamInfo<HfOracle::ParamType>& info) {
  const auto layout = std::get<1>(info.param);
  return std::string(std::get<0>(info.param)) + "_tp" + std::to_string(layout.first) + "_dp" +
         std::to_string(layout.second);
}

INSTANTIATE_TEST_SUITE_P(Models, HfOracle,
                         ::testing::Combine(::testing::Values("dense", "moe"),
                                            ::testing::Values(std::make_pair(1, 1), std::make_pair(4, 2))),
                         Name);

}  // namespace
}  // namespace seam::models

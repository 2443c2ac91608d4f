// `seam check --pp P`: a random 4-layer checkpoint split into pipeline pieces
// (handoffs per TP rank) must give bitwise-identical logits to one rank at
// tp 1, and match within tolerance at tp 2.
#include <sstream>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "check_command.h"
#include "command_status.h"
#include "seam/core/status.h"
#include "seam/testing/temp_dir.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::cli {
namespace {

std::string FourLayerCheckpoint() {
  static const seam::testing::TempDir root("seam_check_pp");  // removed at exit
  static const std::string dir = [] {
    weights::ModelConfig c;
    c.architecture = "qwen3";
    c.hidden_size = 64;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.intermediate_size = 96;
    c.vocab_size = 160;
    c.rope_theta = 10000.0f;
    const std::string d = root.File("dense");
    SEAM_CHECK_OK(weights::WriteRandomCheckpoint(c, weights::RandomCheckpointOptions{7u, false, 10.0f}, d));
    return d;
  }();
  return dir;
}

class CheckPipeline : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CheckPipeline, PiecesMatchOneRank) {
  const auto& [pp, tp] = GetParam();
  CheckCommandOptions o;
  o.model_dir = FourLayerCheckpoint();
  o.pp = pp;
  o.tp = tp;
  o.max_len = 9;
  o.decode_steps = 3;
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_TRUE(s.ok()) << out.str() << s;
  EXPECT_NE(out.str().find(" pp " + std::to_string(pp) + " (layers [0,"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("greedy tokens:  identical"), std::string::npos) << out.str();
  if (tp == 1) {
    EXPECT_NE(out.str().find("bitwise identical: yes"), std::string::npos) << out.str();
  }
  EXPECT_NE(out.str().find("\nOK\n"), std::string::npos) << out.str();
}

INSTANTIATE_TEST_SUITE_P(Grid, CheckPipeline, ::testing::Combine(::testing::Values(2, 3), ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return "pp" + std::to_string(std::get<0>(info.param)) + "_tp" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(CheckPipelineArgs, MorePiecesThanLayersExitsTwo) {
  CheckCommandOptions o;
  o.model_dir = FourLayerCheckpoint();
  o.pp = 5;
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ExitCode(s), 2);
  EXPECT_NE(s.message().find("--pp 5"), std::string::npos) << s;
}

}  // namespace
}  // namespace seam::cli

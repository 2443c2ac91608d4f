// `seam check` over the TP × attention-DP grid for both architectures, on
// real Gloo: random checkpoints written by the weights library, prompts of
// different lengths, and a decode batch smaller than the number of
// attention-DP groups. Also: bad arguments exit 2 naming the value.
#include <sstream>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "check_command.h"
#include "command_status.h"
#include "seam/core/status.h"
#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::cli {
namespace {

std::string Checkpoint(bool moe) {
  static const seam::testing::TempDir root("seam_check");  // removed at exit
  const std::string dir = root.File(moe ? "moe" : "dense");
  static bool written[2] = {false, false};
  if (!written[moe]) {
    // The tests' tiny Qwen3 (-MoE) with a larger vocabulary and an lm_head of its own.
    weights::ModelConfig c = seam::testing::TinyConfig(moe);
    c.vocab_size = 160;
    c.tie_word_embeddings = false;
    SEAM_CHECK_OK(weights::WriteRandomCheckpoint(c, weights::RandomCheckpointOptions{moe ? 5u : 4u, false, 10.0f}, dir));
    written[moe] = true;
  }
  return dir;
}

using Param = std::tuple<bool, std::pair<int, int>, int>;
class CheckGrid : public ::testing::TestWithParam<Param> {};

TEST_P(CheckGrid, TensorParallelRunMatchesOneRank) {
  const auto& [moe, layout, prompts] = GetParam();
  CheckCommandOptions o;
  o.model_dir = Checkpoint(moe);
  o.tp = layout.first;
  o.attn_dp = layout.second;
  o.prompts = prompts;
  o.max_len = 9;
  o.decode_steps = 3;
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_TRUE(s.ok()) << out.str() << s;
  EXPECT_NE(out.str().find("greedy tokens:  identical"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nOK\n"), std::string::npos) << out.str();
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [moe, layout, prompts] = info.param;
  return std::string(moe ? "qwen3_moe" : "qwen3") + "_tp" + std::to_string(layout.first) + "_dp" +
         std::to_string(layout.second) + "_" + std::to_string(prompts) + "prompts";
}

// One prompt with two DP groups: the decode batch is smaller than the DP size.
INSTANTIATE_TEST_SUITE_P(Grid, CheckGrid,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 1),
                                                              std::make_pair(2, 2), std::make_pair(4, 1),
                                                              std::make_pair(4, 2)),
                                            ::testing::Values(3, 1)),
                         Name);

TEST(CheckCommand, AttentionDpThatDoesNotDivideTpExitsTwoNamingTheSizes) {
  CheckCommandOptions o;
  o.model_dir = Checkpoint(false);
  o.tp = 4;
  o.attn_dp = 3;
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ExitCode(s), 2);
  EXPECT_NE(s.message().find("--attn-dp 3 does not divide --tp 4"), std::string::npos) << s;
}

TEST(CheckCommand, ConfigThatDoesNotDivideOverTpExitsTwoNamingTheField) {
  CheckCommandOptions o;
  o.model_dir = Checkpoint(false);
  o.tp = 8;  // 4 heads over attention TP 8
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ExitCode(s), 2);
  EXPECT_NE(s.message().find("num_attention_heads"), std::string::npos) << s;
}

TEST(CheckCommand, Bf16GroupMatchesOneBf16RankWithinTheStatedTolerance) {
  CheckCommandOptions o;
  o.model_dir = Checkpoint(true);
  o.tp = 2;
  o.attn_dp = 2;
  o.dtype = "bf16";
  o.tolerance = 5e-2;
  o.max_len = 9;
  o.decode_steps = 3;
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_TRUE(s.ok()) << out.str() << s;
  EXPECT_NE(out.str().find("(bf16: each side rounds"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nOK\n"), std::string::npos) << out.str();
  // 3 prompts x 3 decode steps: every decode row is within the tolerance.
  EXPECT_NE(out.str().find("(0 of 9 rows above the tolerance)"), std::string::npos) << out.str();
}

TEST(CheckCommand, Bf16AtATightToleranceIsAMismatch) {
  CheckCommandOptions o;
  o.model_dir = Checkpoint(false);
  o.tp = 2;
  o.dtype = "bf16";
  o.tolerance = 1e-9;  // below bf16's rounding: the TP split must show
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << out.str() << s;
  EXPECT_EQ(ExitCode(s), 1);
  EXPECT_NE(s.message().find("MISMATCH"), std::string::npos) << s;
  EXPECT_NE(out.str().find("MISMATCH"), std::string::npos) << out.str();
  // Every row differs from the single rank by more than 1e-9 (default: 3 prompts x 4 decode steps).
  EXPECT_NE(out.str().find("(12 of 12 rows above the tolerance)"), std::string::npos) << out.str();
}

TEST(CheckCommand, UnknownDeviceOrDtypeExitsTwo) {
  CheckCommandOptions o;
  o.model_dir = Checkpoint(false);
  o.device = "tpu";
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ExitCode(s), 2);
  EXPECT_NE(s.message().find("--device must be cpu or cuda"), std::string::npos) << s;
}

TEST(CheckCommand, MissingModelDirectoryFailsNamingThePath) {
  CheckCommandOptions o;
  o.model_dir = "/nonexistent/seam-model";
  std::ostringstream out;
  const absl::Status s = RunCheckCommand(o, out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(ExitCode(s), 0);
  EXPECT_NE(s.message().find("/nonexistent/seam-model"), std::string::npos) << s;
}

}  // namespace
}  // namespace seam::cli

// Runs the built `seam` binary as a user would and checks its exit codes and
// output: plan text and JSON, argument errors, and the Gloo demo.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct SeamRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

SeamRun RunSeam(const std::string& args) {
  SeamRun run;
  const std::string command = std::string(SEAM_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(SeamPlan, TextListsEveryStageAndItsCollectives) {
  const SeamRun run = RunSeam("plan --tp 4 --attn-dp 2 --layers 3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("tp=4 attn_dp=2 attn_tp=2"), std::string::npos) << run.output;
  EXPECT_TRUE(run.output.find("reduce_scatterv") != std::string::npos ||
              run.output.find("all_gather") != std::string::npos)
      << run.output;
  for (int s = 0; s < 6; ++s) {
    EXPECT_NE(run.output.find("stage " + std::to_string(s) + ": layer " + std::to_string(s / 2)), std::string::npos)
        << "stage " << s << " missing:\n"
        << run.output;
  }
  EXPECT_EQ(run.output.find("rank"), std::string::npos) << "plan text must not depend on the rank";
}

TEST(SeamPlan, JsonParsesAndHasSixStages) {
  const SeamRun run = RunSeam("plan --tp 4 --attn-dp 2 --layers 3 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = nlohmann::json::parse(run.output);
  ASSERT_EQ(doc.at("stages").size(), 6u);
  EXPECT_EQ(doc.at("topology").at("attn_tp"), 2);
  EXPECT_EQ(doc.at("stages").at(5).at("place").at("terminal"), true);
  EXPECT_FALSE(doc.at("stages").at(5).at("variants").at(0).at("final_read").empty());
}

TEST(SeamPlan, OneRankPrintsTheSamePlanAsAllRanks) {
  const SeamRun all = RunSeam("plan --tp 4 --attn-dp 2 --layers 2 --policy rs+rsv");
  const SeamRun one = RunSeam("plan --tp 4 --attn-dp 2 --layers 2 --policy rs+rsv --rank 3");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(all.output, one.output);
}

TEST(SeamPlan, PrintsTheDeferredFinalizeBranchesCapturesAndFinalReads) {
  const SeamRun moe = RunSeam("plan --tp 2 --layers 2 --arch qwen3_moe");
  ASSERT_EQ(moe.exit_code, 0) << moe.output;
  EXPECT_NE(moe.output.find("defer_moe_finalize_to_final_norm"), std::string::npos) << moe.output;
  EXPECT_NE(moe.output.find("final norm: takes a deferred MoE finalize"), std::string::npos) << moe.output;
  EXPECT_NE(moe.output.find("final read pending(ffn_rows, owes MOE_OUTPUT"), std::string::npos) << moe.output;
  EXPECT_NE(moe.output.find("capture: the updated residual"), std::string::npos) << moe.output;
  const SeamRun longcat = RunSeam("plan --tp 2 --layers 1 --arch longcat");
  ASSERT_EQ(longcat.exit_code, 0) << longcat.output;
  EXPECT_NE(longcat.output.find("branch: first stage, entered through branch_input"), std::string::npos)
      << longcat.output;
}

TEST(SeamPlan, PrintsGatheringReadsAndReadsAfterTheGather) {
  const SeamRun gathering = RunSeam("plan --tp 4 --layers 2 --policy rs --reads gathering");
  ASSERT_EQ(gathering.exit_code, 0) << gathering.output;
  EXPECT_NE(gathering.output.find("gathering_read(attn_tp: attn_tp_slice->dp_rows)"), std::string::npos)
      << gathering.output;
  EXPECT_NE(gathering.output.find("gathering_reads=yes"), std::string::npos) << gathering.output;
  const SeamRun after = RunSeam("plan --tp 4 --attn-dp 2 --layers 2 --reads after-gather");
  ASSERT_EQ(after.exit_code, 0) << after.output;
  EXPECT_NE(after.output.find("apply_update, gather_residual(attn_dp: dp_rows->ffn_rows), norm_gathered"),
            std::string::npos)
      << after.output;
  EXPECT_NE(after.output.find("gather_residual(attn_tp: attn_tp_slice->dp_rows), norm_gathered"), std::string::npos)
      << after.output;
  const SeamRun bad = RunSeam("plan --tp 2 --layers 1 --reads sideways");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown --reads 'sideways'"), std::string::npos) << bad.output;
}

TEST(SeamPlan, AttnDpNotDividingTpIsRejectedNamingTheSizes) {
  const SeamRun run = RunSeam("plan --tp 4 --attn-dp 3 --layers 2");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--attn-dp 3 does not divide --tp 4"), std::string::npos) << run.output;
}

TEST(SeamPlan, UnknownPolicyIsRejectedNamingIt) {
  const SeamRun run = RunSeam("plan --tp 2 --layers 1 --policy fastest");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("'fastest'"), std::string::npos) << run.output;
}

TEST(SeamDemo, TwoGlooRanksMatchTheReference) {
  const SeamRun run = RunSeam("demo --ranks 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("AllReduce(tp, f32[7, 96])"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("demo OK"), std::string::npos) << run.output;
}

TEST(SeamCli, VersionPrintsTheProjectVersion) {
  const SeamRun run = RunSeam("--version");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.rfind("seam ", 0), 0u) << run.output;
}

// An existing checkpoint is never overwritten silently: ALREADY_EXISTS
// (exit 1) naming the file and --force, which replaces it.
TEST(SeamModelInit, RefusesToOverwriteACheckpointUnlessForced) {
  char dir_template[] = "/tmp/seam_model_init_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string out = dir_template;
  const std::string args = "model init --layers 1 --hidden 8 --heads 2 --intermediate 16 --vocab 16 --out " + out;
  const SeamRun first = RunSeam(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const SeamRun again = RunSeam(args + " --seed 3");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find(out + "/config.json exists"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  const SeamRun forced = RunSeam(args + " --seed 3 --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  std::system(("rm -rf " + out).c_str());
}

// Nemotron-H: one stage per pattern character; Mamba and attention print as
// exit-scoped mixers owing their attention-TP sum, the MLP as an FFN.
TEST(SeamPlan, NemotronHPatternPrintsMixerStagesWithExitScopedSums) {
  const SeamRun run = RunSeam("plan --tp 4 --attn-dp 2 --arch nemotron_h --pattern 'MM*--M'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("plan: 6 stages"), std::string::npos) << run.output;
  for (int s : {0, 1, 2, 5}) {
    EXPECT_NE(run.output.find("stage " + std::to_string(s) + ": layer " + std::to_string(s) +
                              ", mixer(EXIT_SCOPED, no attn-TP gather), owes ATTN_TP"),
              std::string::npos)
        << run.output;
  }
  EXPECT_NE(run.output.find("stage 3: layer 3, ffn("), std::string::npos) << run.output;
  const SeamRun bad = RunSeam("plan --tp 2 --arch nemotron_h --pattern 'MEM'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--pattern of M (Mamba2)"), std::string::npos) << bad.output;
}

TEST(SeamModelInit, WritesANemotronHCheckpoint) {
  char dir_template[] = "/tmp/seam_model_init_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string out = dir_template;
  const SeamRun run = RunSeam(
      "model init --arch nemotron_h --layers 3 --pattern 'M*-' --hidden 16 --heads 2 --intermediate 32 --vocab 32 "
      "--mamba-heads 4 --mamba-head-dim 4 --groups 2 --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("nemotron_h, 3 layers"), std::string::npos) << run.output;
  const SeamRun bad = RunSeam("model init --arch nemotron_h --layers 2 --pattern 'M*-' --hidden 16 --heads 2 "
                              "--intermediate 32 --vocab 32 --mamba-heads 4 --mamba-head-dim 4 --force --out " + out);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("one character per layer (--layers 2)"), std::string::npos) << bad.output;
  std::system(("rm -rf " + out).c_str());
}

}  // namespace

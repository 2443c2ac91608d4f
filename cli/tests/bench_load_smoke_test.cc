// `seam bench load --smoke` as a user runs it: a local CPU pipeline (real
// seam-stage and seam-coordinator processes), a few tiny requests over gRPC
// and the OpenAI HTTP API, closed and open loop. Checks the report's shape
// (fields present, counts consistent with the workload), never timings;
// and that a failed request ends the run with its error and exit 1.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/testing/command_run.h"
#include "seam_source_commit.h"
#include "seam/testing/temp_dir.h"

namespace {

using Json = nlohmann::json;
using seam::testing::CommandRun;
using seam::testing::RunCommand;

CommandRun RunLoad(const std::string& args) { return RunCommand(std::string(SEAM_BINARY) + " bench load " + args); }

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

void ExpectPercentiles(const Json& p, const std::string& what) {
  ASSERT_TRUE(p.is_object()) << what;
  for (const char* key : {"p50", "p90", "p99", "mean", "samples"}) EXPECT_TRUE(p.contains(key)) << what << " " << key;
  EXPECT_LE(p["p50"].get<double>(), p["p90"].get<double>()) << what;
  EXPECT_LE(p["p90"].get<double>(), p["p99"].get<double>()) << what;
}

TEST(BenchLoadSmoke, BothTransportsClosedAndOpenLoopReportEveryRequest) {
  seam::testing::TempDir dir("bench_load_smoke");
  const CommandRun run = RunLoad("--smoke --json " + dir.File("load.json") + " --svg " + dir.File("load.svg"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("x ideal"), std::string::npos) << run.output;
  const Json report = ReadJson(dir.File("load.json"));
  ASSERT_TRUE(report.is_object()) << run.output;
  const Json& workload = report["workload"];
  EXPECT_EQ(workload["shape"], "plain");
  EXPECT_EQ(workload["requests"], 6);
  EXPECT_EQ(workload["output_tokens"], 24);  // 6 requests x 4 tokens, every one made
  EXPECT_GT(report["peaks"]["copy_bytes_per_s"].get<double>(), 0);
  EXPECT_GT(report["peaks"]["matmul_flops_per_s"].get<double>(), 0);
  EXPECT_EQ(report["peaks"]["matmul_data"], "random");
  ASSERT_EQ(report["peaks"]["matmul_by_shape"].size(), 5u);  // the square, q|k|v, o, gate|up, down
  for (const Json& shape : report["peaks"]["matmul_by_shape"]) {
    EXPECT_GT(shape["random_flops_per_s"].get<double>(), 0) << shape.dump();
    EXPECT_TRUE(shape["constant_flops_per_s"].is_null()) << shape.dump();  // timed on a GPU only
  }
  // The commit the binary was built from, whatever the working directory.
  EXPECT_EQ(report["commit"], SEAM_SOURCE_COMMIT);
  ASSERT_EQ(report["runs"].size(), 4u);  // grpc and http x concurrency 3 and rate inf
  for (const Json& r : report["runs"]) {
    const std::string what = r["transport"].get<std::string>() + " " + r["load"]["mode"].get<std::string>();
    EXPECT_EQ(r["variant"], "default") << what;
    EXPECT_EQ(r["requests"], workload["requests"]) << what;
    EXPECT_EQ(r["output_tokens"], workload["output_tokens"]) << what;
    EXPECT_EQ(r["prompt_tokens"], workload["prompt_tokens"]) << what;
    EXPECT_GT(r["output_tok_per_s"].get<double>(), 0) << what;
    ExpectPercentiles(r["e2e_ms"], what + " e2e");
    if (r["transport"] == "grpc") {  // every token stamped
      EXPECT_EQ(r["timing"], "token") << what;
      ExpectPercentiles(r["ttft_ms"], what + " ttft");
      ExpectPercentiles(r["itl_ms"], what + " itl");
      EXPECT_EQ(r["itl_ms"]["samples"], 6 * 3) << what;  // 3 gaps after each first token
    } else {  // the smoke model has no tokenizer.json: one chunk at the end
      EXPECT_EQ(r["timing"], "none") << what;
      EXPECT_TRUE(r["ttft_ms"].is_null()) << what;
    }
    EXPECT_EQ(r["goodput"]["good_requests"], 6) << what;  // no latency target
    ASSERT_TRUE(r["ideal"].is_object()) << what;
    EXPECT_GT(r["ideal"]["seconds"].get<double>(), 0) << what;
    EXPECT_EQ(r["ideal"]["decode_steps"].get<int>() > 0, true) << what;
    EXPECT_TRUE(r["vs_first"].is_object()) << what;
    // The stage's /metrics read around the point: it computed every step of it.
    ASSERT_EQ(r["stages"].size(), 1u) << what;
    const Json& stage = r["stages"][0];
    EXPECT_TRUE(stage["error"].is_null()) << what << " " << stage.dump();
    EXPECT_EQ(stage["stage"], 0) << what;
    EXPECT_GT(stage["busy_s"].get<double>(), 0) << what;
    EXPECT_GT(stage["busy_fraction"].get<double>(), 0) << what;
    EXPECT_GE(stage["steps"].get<int>(), 4) << what;  // at least one step per output token of a request
    EXPECT_EQ(stage["graph_steps"].get<int>() + stage["eager_steps"].get<int>(), stage["steps"].get<int>()) << what;
    // Split by what the steps held (seam:stage_step_seconds{kind}): every prompt
    // was prefilled (alone or beside decode rows), and decode steps followed.
    const Json& kinds = stage["by_kind"];
    ASSERT_TRUE(kinds.is_object()) << what << " " << stage.dump();
    int steps = 0;
    for (const char* kind : {"decode", "prefill", "mixed"}) steps += kinds[kind]["steps"].get<int>();
    EXPECT_EQ(steps, stage["steps"].get<int>()) << what;
    EXPECT_GT(kinds["decode"]["steps"].get<int>(), 0) << what;
    EXPECT_GT(kinds["prefill"]["steps"].get<int>() + kinds["mixed"]["steps"].get<int>(), 0) << what;
  }
  EXPECT_NE(run.output.find("busy share of wall s"), std::string::npos) << run.output;
  std::ifstream svg(dir.File("load.svg"));
  std::string first_line;
  std::getline(svg, first_line);
  EXPECT_EQ(first_line.rfind("<svg", 0), 0u) << first_line;
}

TEST(BenchLoadSmoke, MultiTurnVariantsCompareWithTheFirst) {
  seam::testing::TempDir dir("bench_load_turns");
  const CommandRun run = RunLoad("--smoke --workload multi-turn:2 --sessions 3 --concurrency 3 --no-ideal "
                                 "--variant base --variant 'steps1:coordinator:--decode-steps=1' --json " +
                                 dir.File("load.json"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Json report = ReadJson(dir.File("load.json"));
  ASSERT_TRUE(report.is_object()) << run.output;
  EXPECT_EQ(report["workload"]["requests"], 6);  // 3 conversations of 2 turns
  EXPECT_TRUE(report["peaks"]["matmul_flops_per_s"].is_null());
  ASSERT_EQ(report["runs"].size(), 4u);  // 2 variants x grpc, http
  for (const Json& r : report["runs"]) {
    EXPECT_EQ(r["requests"], 6);
    EXPECT_EQ(r["prompt_tokens"], report["workload"]["prompt_tokens"]);
    EXPECT_TRUE(r["ideal"].is_null());
    EXPECT_EQ(r["vs_first"]["variant"], "base");
  }
  EXPECT_EQ(report["variants"][1]["coordinator_args"][0], "--decode-steps=1");
}

TEST(BenchLoadSmoke, AFailedRequestEndsTheRunWithItsError) {
  const CommandRun run = RunLoad("--smoke --no-ideal --warmup 0 --coordinator-arg=--max-prompt-tokens=2");
  EXPECT_EQ(run.exit_code, 1) << run.output;  // the flags were fine: the server refused the work
  EXPECT_NE(run.output.find("load-default-grpc-p0-s"), std::string::npos) << run.output;  // names the request
  EXPECT_NE(run.output.find("INVALID_ARGUMENT"), std::string::npos) << run.output;
}

TEST(BenchLoadSmoke, BadFlagsAreRefusedByName) {
  const CommandRun run = RunLoad("--prompt-len uniform:9:1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("uniform:9:1"), std::string::npos) << run.output;
  const CommandRun addr = RunLoad("--addr 127.0.0.1:1 --variant a --variant b");
  EXPECT_EQ(addr.exit_code, 2) << addr.output;
  EXPECT_NE(addr.output.find("--addr measures a running server"), std::string::npos) << addr.output;
}

}  // namespace

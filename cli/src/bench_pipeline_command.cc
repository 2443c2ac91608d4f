// `seam bench pipeline`: handoff bandwidth and latency (bench_handoff_runner.cc),
// then one fixed concurrent workload through local pipelines at PP 1..N back to back,
// as generated tokens/s against ideal(P) = tokens/s at PP 1 x min(P, cores).
#include "bench_pipeline_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "bench_handoff_runner.h"
#include "command_status.h"
#include "local_pipeline.h"
#include "seam/core/temp_dir.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::cli {
namespace {

struct Workload {
  int requests, prompt_len, new_tokens;
};

// Sends `w.requests` one-prompt GenerateAll calls at once; returns the tokens
// generated and the wall time from the first submit to the last answer.
absl::StatusOr<std::pair<int64_t, double>> RunWorkload(v1::Coordinator::Stub& stub, const Workload& w,
                                                       int64_t vocab) {
  std::vector<std::thread> threads;
  std::vector<grpc::Status> status(w.requests);
  std::atomic<int64_t> tokens{0};
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < w.requests; ++r) {
    threads.emplace_back([&, r] {
      v1::GenerateRequest request;
      request.set_request_id("bench-" + std::to_string(r));
      auto* prompt = request.add_prompts()->mutable_token_ids();
      for (int t = 0; t < w.prompt_len; ++t) prompt->Add(static_cast<int32_t>((r * 131 + t * 7 + 2) % vocab));
      request.mutable_sampling()->set_temperature(0);
      request.mutable_sampling()->set_max_new_tokens(w.new_tokens);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
      v1::GenerateResult result;
      status[r] = stub.GenerateAll(&context, request, &result);
      for (const auto& c : result.completions()) tokens += c.token_ids_size();
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < w.requests; ++r) {
    if (!status[r].ok()) {
      return absl::InternalError("request " + std::to_string(r) + ": GenerateAll failed (grpc code " +
                                 std::to_string(status[r].error_code()) + "): " + status[r].error_message());
    }
  }
  return std::make_pair(tokens.load(), secs);
}

absl::StatusOr<std::pair<int64_t, double>> MeasurePipeline(const std::string& model_dir, const std::string& work,
                                                           int pp, const std::string& ucx_mode, const Workload& w,
                                                           int64_t vocab) {
  std::filesystem::create_directories(work);
  LocalPipelineOptions lp;
  lp.model_dir = model_dir;
  lp.work_dir = work;
  lp.pp = pp;
  lp.ucx_mode = ucx_mode;
  lp.stage_timeout = "60s";
  auto pipeline = LocalPipeline::Start(lp);
  if (!pipeline.ok()) return pipeline.status();
  auto stub = v1::Coordinator::NewStub(
      (*pipeline)->ClientChannel());
  auto warm = RunWorkload(*stub, Workload{2, w.prompt_len, 2}, vocab);  // connections and first-touch, untimed
  auto timed = warm.ok() ? RunWorkload(*stub, w, vocab) : warm;
  if (!timed.ok()) {
    return absl::Status(timed.status().code(),
                        std::string(timed.status().message()) + "\n" + (*pipeline)->LogTails(10));
  }
  (*pipeline)->Stop();
  return timed;
}

}  // namespace

absl::Status RunBenchPipelineCommand(const BenchPipelineOptions& given, std::ostream& out) {
  BenchPipelineOptions o = given;
  if (o.quick) o = {true, given.max_pp, 4, 8, 4, 3, 64, 256, given.ucx_mode, given.json_out};
  if (o.max_pp < 1 || o.requests < 1 || o.prompt_len < 1 || o.new_tokens < 1 || o.layers < o.max_pp ||
      o.hidden < 8 || o.hidden % 8 != 0 || o.vocab < 8 || (o.ucx_mode != "tcp" && o.ucx_mode != "shm")) {
    return absl::InvalidArgumentError(
        "--max-pp, --requests, --prompt-len, --new-tokens must be >= 1, --layers >= --max-pp, --hidden a multiple "
        "of 8, --ucx-mode tcp or shm");
  }
  absl::StatusOr<std::string> made = MakeTempDir("seam-bench-pipeline-");
  if (!made.ok()) return Failed("", made.status());
  const std::string work = *made;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  out << "seam bench pipeline" << (o.quick ? " --quick" : "") << ": " << cores << " cores; logs in " << work << "\n";
  nlohmann::json results = {{"cores", cores}, {"quick", o.quick}};

  auto handoff = MeasureHandoffBandwidth(o.quick, work, out);
  if (!handoff.ok()) return Failed("", handoff.status());
  results["handoff"] = *handoff;
  auto latency = MeasureHandoffLatency(o.quick, work, out);
  if (!latency.ok()) return Failed("", latency.status());
  results["handoff_latency"] = *latency;

  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = o.layers;
  c.hidden_size = o.hidden;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = o.hidden / 4;
  c.intermediate_size = o.hidden * 3;
  c.vocab_size = o.vocab;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  const std::string model_dir = work + "/model";
  if (absl::Status s = weights::WriteRandomCheckpoint(c, weights::RandomCheckpointOptions{1}, model_dir); !s.ok()) {
    return Failed("", s);
  }
  const Workload w{o.requests, o.prompt_len, o.new_tokens};
  out << "\npipeline throughput: random qwen3 (" << o.layers << " layers, hidden " << o.hidden << ", vocab " << o.vocab
      << "), TP 1, stages over " << o.ucx_mode << "; " << w.requests << " concurrent requests x prompt "
      << w.prompt_len << " x " << w.new_tokens << " new tokens (greedy), microbatches in flight = P\n"
      << "  ideal(P) = tokens/s at PP 1 x min(P, " << cores << " cores): P stages of L/P layers overlap at most\n"
      << "  P-fold, and P single-threaded stage processes can run at once on at most " << cores
      << " cores (the coordinator, gRPC\n  and handoffs are counted as free, so ideal is an upper bound)\n"
      << "    PP   tokens   seconds   tokens/s   ideal tokens/s   ratio\n";
  double base = 0;
  nlohmann::json pipeline = nlohmann::json::array();
  for (int pp = 1; pp <= o.max_pp; ++pp) {
    auto m = MeasurePipeline(model_dir, work + "/pp" + std::to_string(pp), pp, o.ucx_mode, w, o.vocab);
    if (!m.ok()) return Failed(absl::StrCat("pp ", pp, ": "), m.status());
    const double tps = m->first / m->second;
    if (pp == 1) base = tps;
    const double ideal = base * std::min<unsigned>(pp, cores);
    out << std::fixed << std::setw(6) << pp << std::setw(9) << m->first << std::setw(10) << std::setprecision(2)
        << m->second << std::setw(11) << std::setprecision(1) << tps << std::setw(17) << ideal << std::setw(8)
        << std::setprecision(2) << tps / ideal << "\n"
        << std::flush;
    pipeline.push_back({{"pp", pp}, {"tokens", m->first}, {"seconds", m->second}, {"tokens_per_s", tps},
                        {"ideal_tokens_per_s", ideal}, {"ratio_to_ideal", tps / ideal}});
  }
  results["pipeline"] = {{"layers", o.layers}, {"hidden", o.hidden}, {"vocab", o.vocab},
                         {"requests", w.requests}, {"prompt_len", w.prompt_len}, {"new_tokens", w.new_tokens},
                         {"ucx_mode", o.ucx_mode}, {"runs", pipeline}};
  if (!o.json_out.empty()) std::ofstream(o.json_out) << results.dump(2) << "\n";
  std::filesystem::remove_all(work);
  return absl::OkStatus();
}

}  // namespace seam::cli

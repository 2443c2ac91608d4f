// `seam bench serve`: a LocalPipeline timed with concurrent streaming Generate
// calls (served_decode.h), then the in-process decode (in_process_decode.h)
// and the decode step's floor (runtime's StepFloor: weights + KV bytes at the
// copy bandwidth measured here) on the same machine, printed as one table of
// figures and ratios.
#include "bench_serve_command.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench_random_model.h"
#include "in_process_decode.h"
#include "local_pipeline.h"
#include "seam/core/status.h"
#include "seam/core/temp_dir.h"
#include "seam/kernels/cpu_threads.h"
#include "seam/runtime/measured_peaks.h"
#include "seam/runtime/step_floor.h"
#include "served_decode.h"
#include "source_commit.h"

namespace seam::cli {
namespace {

// The decode step's floor: the bytes one rank moves (StepFloor) at the copy
// bandwidth of its memory, measured here.
struct Floor {
  std::optional<runtime::StepFloor> step;
  int64_t mean_context = 0;  // tokens each sequence attends in the mean timed step
  int readers = 1;           // ranks sharing the bandwidth (CPU ranks of one host)
  double bytes_per_s = 0;
  std::string source;  // how the bandwidth was measured, or why it was not
  double Bytes(int batch) const { return step->DecodeStep(batch, batch * mean_context).total() * readers; }
  double MsPerStep(int batch) const { return bytes_per_s > 0 ? 1e3 * Bytes(batch) / bytes_per_s : 0; }
};

struct Row {
  int batch = 0;
  ServedFigures served;
  std::optional<InProcessFigures> in_process;
};

std::optional<std::vector<int>> ParseBatches(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int b = 0;
    if (!absl::SimpleAtoi(piece, &b) || b < 1) return std::nullopt;
    out.push_back(b);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

RandomModelSizes Sizes(const BenchServeOptions& o) {
  return RandomModelSizes{o.layers, o.hidden, o.heads, o.kv_heads, o.head_dim, o.intermediate, o.vocab};
}

std::string CheckArguments(const BenchServeOptions& o) {
  if (o.pp < 1 || o.tp < 1 || o.attn_dp < 1 || o.tp % o.attn_dp != 0) {
    return "--pp, --tp and --attn-dp must be >= 1 and --attn-dp must divide --tp";
  }
  if (o.prompt_len < 1 || o.new_tokens < 2 || o.warmup < 0) {
    return "--prompt-len must be >= 1, --new-tokens >= 2 (one token from the prefill, then decode steps), "
           "--warmup >= 0";
  }
  if (!ParseBatches(o.batch)) return "--batch must be a list of sizes >= 1, e.g. 1,8,32";
  return o.model_dir.empty() ? CheckRandomModelSizes(Sizes(o), o.pp) : "";
}

// Starts the pipeline once and times every batch size through it.
absl::StatusOr<std::vector<ServedFigures>> MeasureServed(const BenchServeOptions& o, const std::string& model_dir,
                                                         const std::string& work, const std::vector<int>& batches,
                                                         int64_t vocab, std::ostream& out) {
  std::error_code ec;
  std::filesystem::create_directories(work, ec);
  LocalPipelineOptions lp;
  lp.model_dir = model_dir;
  lp.work_dir = work;
  lp.pp = o.pp;
  lp.tp = o.tp;
  lp.attn_dp = o.attn_dp;
  lp.device = o.device;
  lp.stage_timeout = "60s";
  lp.extra_stage_args = {"--dtype", o.dtype};
  lp.extra_stage_args.insert(lp.extra_stage_args.end(), o.stage_args.begin(), o.stage_args.end());
  lp.extra_coordinator_args = o.coordinator_args;
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<LocalPipeline> pipeline, LocalPipeline::Start(lp));
  out << "served: seam-coordinator at " << pipeline->coordinator_address() << " over " << o.pp
      << " seam-stage (logs in " << work << ")\n"
      << std::flush;
  auto stub = v1::Coordinator::NewStub(
      pipeline->ClientChannel());
  std::vector<ServedFigures> figures;
  for (int b : batches) {
    ServedWorkload w{b, o.prompt_len, o.new_tokens, vocab, 0};
    absl::StatusOr<ServedFigures> f;
    for (int r = 0; r <= o.warmup; ++r) {
      w.round = r < o.warmup ? r + 1 : 0;  // the timed round: round 0's prompts, as the in-process one
      f = RunServedWorkload(*stub, w);
      if (!f.ok()) {
        return absl::Status(f.status().code(), absl::StrCat("batch ", b, ": ", f.status().message(), "\n",
                                                            pipeline->LogTails(10)));
      }
    }
    out << absl::StrFormat("  batch %d: %.1f tok/s, %.3f ms/step, TTFT p50 %.1f ms, ITL p50 %.3f ms\n", b,
                           f->tokens_per_s, f->ms_per_step, f->ttft_p50_ms, f->itl_p50_ms)
        << std::flush;
    figures.push_back(*f);
  }
  pipeline->Stop();
  return figures;
}

Floor MeasureFloor(const BenchServeOptions& o, const weights::ModelConfig& config) {
  Floor f;
  runtime::StepFloorOptions options;
  options.weight_dtype = options.cache_dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  options.tp = o.tp, options.attn_dp = o.attn_dp;
  f.step = runtime::StepFloor::Of(config, options);
  // The timed steps feed tokens 1 .. new_tokens - 1 after the prompt.
  f.mean_context = o.prompt_len + o.new_tokens / 2;
  absl::StatusOr<double> bw;
  if (o.device == "cuda") {
    bw = runtime::CopyBytesPerSecond(Device::CUDA(0), size_t{1} << 30);
    f.source = "device-to-device copy of 1 GiB on GPU 0, each TP rank reading its share on its own GPU";
  } else {
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const size_t bytes = o.quick ? size_t{32} << 20 : size_t{256} << 20;
    bw = runtime::CopyBytesPerSecond(Device::CPU(), bytes, threads);
    f.readers = o.tp;  // CPU ranks of one host share its memory
    f.source = absl::StrFormat("host memcpy of %d MiB on %d threads", bytes >> 20, threads);
  }
  if (!bw.ok()) {
    f.source = "not measured: " + std::string(bw.status().message());
    return f;
  }
  f.bytes_per_s = *bw;
  return f;
}

std::string Cell(double v, const char* format, bool present = true) {
  return present ? absl::StrFormat(format, v) : "-";
}

void PrintTable(const std::vector<Row>& rows, const Floor& floor, std::ostream& out) {
  const char* const kRow = "%6s %8s %11s %11s %12s %12s %10s %15s %13s %9s %9s %9s %9s %9s\n";
  out << absl::StrFormat(kRow, "batch", "context", "served", "served", "in-process", "in-process", "floor",
                         "served/in-proc", "served/floor", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "e2e p50")
      << absl::StrFormat(kRow, "", "tokens", "tok/s", "ms/step", "tok/s", "ms/step", "ms/step", "(ms/step)",
                         "(ms/step)", "ms", "ms", "ms", "ms", "ms");
  const bool has_floor = floor.bytes_per_s > 0;
  for (const Row& r : rows) {
    const ServedFigures& s = r.served;
    const bool in = r.in_process.has_value() && r.in_process->ms_per_step > 0;
    const InProcessFigures ip = r.in_process.value_or(InProcessFigures{});
    const double floor_ms = floor.MsPerStep(r.batch);
    out << absl::StrFormat(kRow, std::to_string(r.batch), std::to_string(floor.mean_context),
                           Cell(s.tokens_per_s, "%.1f"), Cell(s.ms_per_step, "%.3f"),
                           Cell(ip.tokens_per_s, "%.1f", in), Cell(ip.ms_per_step, "%.3f", in),
                           Cell(floor_ms, "%.4f", has_floor), Cell(in ? s.ms_per_step / ip.ms_per_step : 0, "%.2f", in),
                           Cell(has_floor ? s.ms_per_step / floor_ms : 0, "%.1f", has_floor),
                           Cell(s.ttft_p50_ms, "%.1f"), Cell(s.ttft_p99_ms, "%.1f"), Cell(s.itl_p50_ms, "%.3f"),
                           Cell(s.itl_p99_ms, "%.3f"), Cell(s.e2e_p50_ms, "%.1f"));
  }
}

nlohmann::json ToJson(const BenchServeOptions& o, const weights::ModelConfig& c, const std::string& model,
                      const std::string& in_process_path, const Floor& floor, const std::vector<Row>& rows) {
  nlohmann::json results = nlohmann::json::array();
  for (const Row& r : rows) {
    const ServedFigures& s = r.served;
    nlohmann::json row = {{"batch", r.batch},
                          {"served", {{"tokens", s.tokens}, {"wall_seconds", s.wall_seconds},
                                      {"tokens_per_s", s.tokens_per_s}, {"ms_per_step", s.ms_per_step},
                                      {"ttft_p50_ms", s.ttft_p50_ms}, {"ttft_p99_ms", s.ttft_p99_ms},
                                      {"itl_p50_ms", s.itl_p50_ms}, {"itl_p99_ms", s.itl_p99_ms},
                                      {"e2e_p50_ms", s.e2e_p50_ms}}},
                          {"in_process", nullptr},
                          {"floor_bytes_per_step", floor.Bytes(r.batch)},
                          {"floor_ms_per_step", floor.bytes_per_s > 0 ? nlohmann::json(floor.MsPerStep(r.batch))
                                                                      : nullptr},
                          {"served_over_in_process", nullptr},
                          {"served_over_floor", nullptr}};
    if (r.in_process) {
      row["in_process"] = {{"prefill_ms", r.in_process->prefill_ms}, {"ms_per_step", r.in_process->ms_per_step},
                           {"tokens_per_s", r.in_process->tokens_per_s}};
      row["served_over_in_process"] = s.ms_per_step / r.in_process->ms_per_step;
    }
    if (floor.bytes_per_s > 0) row["served_over_floor"] = s.ms_per_step / floor.MsPerStep(r.batch);
    results.push_back(row);
  }
  return {{"commit", SourceCommit()},
          {"model", {{"dir", model}, {"random", o.model_dir.empty()}, {"architecture", c.architecture}, {"layers", c.num_hidden_layers},
                     {"hidden", c.hidden_size}, {"heads", c.num_attention_heads},
                     {"kv_heads", c.num_key_value_heads}, {"head_dim", c.head_dim},
                     {"intermediate", c.intermediate_size}, {"vocab", c.vocab_size}}},
          {"layout", {{"pp", o.pp}, {"tp", o.tp}, {"attn_dp", o.attn_dp}}},
          {"device", o.device},
          {"dtype", o.dtype},
          {"workload", {{"prompt_len", o.prompt_len}, {"new_tokens", o.new_tokens}, {"warmup", o.warmup},
                        {"quick", o.quick}}},
          {"cores", std::thread::hardware_concurrency()},
          {"in_process_path", in_process_path},
          {"floor", {{"weight_bytes_per_step", floor.step->DecodeStep(1, 0).weights * floor.readers},
                     {"kv_bytes_per_token", floor.step->kv_bytes_per_token() * floor.readers},
                     {"mean_context", floor.mean_context}, {"bandwidth_bytes_per_s", floor.bytes_per_s},
                     {"bandwidth_source", floor.source},
                     {"what", "weights + each sequence's KV over the mean context of the timed steps (runtime's "
                              "StepFloor) at the copy bandwidth"}}},
          {"results", results}};
}

}  // namespace

absl::Status RunBenchServeCommand(const BenchServeOptions& given, std::ostream& out) {
  BenchServeOptions o = given;
  if (o.quick) {
    o.hidden = 64, o.layers = std::max(2, o.pp), o.heads = 4, o.kv_heads = 2, o.head_dim = 16;
    o.intermediate = 128, o.vocab = 256;
    o.batch = "1,2", o.prompt_len = 8, o.new_tokens = 4, o.warmup = 1;
  }
  if (std::string bad = CheckArguments(o); !bad.empty()) return absl::InvalidArgumentError(bad);
  const std::vector<int> batches = *ParseBatches(o.batch);
  const bool operator_chose_threads = std::getenv("OPENBLAS_NUM_THREADS") != nullptr;
  SEAM_ASSIGN_OR_RETURN(const std::string work, MakeTempDir("seam-bench-serve"));
  std::string model_dir = o.model_dir;
  if (model_dir.empty()) {
    model_dir = work + "/model";
    SEAM_RETURN_IF_ERROR(WriteRandomQwen3(Sizes(o), o.dtype == "bf16" ? DType::kBF16 : DType::kF32, model_dir));
  }
  absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(model_dir);
  if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat("--model: ", config.status().message()));
  out << "seam bench serve" << (o.quick ? " --quick" : "") << ": " << config->architecture << " ("
      << config->num_hidden_layers << " layers, hidden " << config->hidden_size << ", vocab " << config->vocab_size
      << (o.model_dir.empty() ? ", random" : "") << ") in " << model_dir << "\n  layout PP " << o.pp << " x TP "
      << o.tp << ", attention DP " << o.attn_dp << ", " << o.device << " " << o.dtype << "; batches " << o.batch
      << " x prompt " << o.prompt_len << " x " << o.new_tokens << " new tokens (greedy), " << o.warmup
      << " untimed round(s) first; " << std::thread::hardware_concurrency() << " cores\n"
      << std::flush;

  auto served = MeasureServed(o, model_dir, o.logs_dir.empty() ? work + "/pipeline" : o.logs_dir, batches,
                              config->vocab_size, out);
  if (!served.ok()) return Annotate(served.status(), "served path");

  std::vector<Row> rows;
  for (size_t i = 0; i < batches.size(); ++i) rows.push_back(Row{batches[i], (*served)[i], std::nullopt});
  // The in-process group uses the cores as a served stage group of the same TP
  // would alone (LocalPipeline set OPENBLAS_NUM_THREADS for its children).
  if (o.device == "cpu" && !operator_chose_threads) kernels::SetCpuMathThreads(kernels::CpuMathThreadsPerRank(o.tp));
  InProcessOptions ip{model_dir, o.tp, o.attn_dp, o.device == "cuda" ? Device::Kind::kCUDA : Device::Kind::kCPU,
                      o.dtype == "bf16" ? DType::kBF16 : DType::kF32, o.prompt_len, o.new_tokens, o.warmup,
                      *std::max_element(batches.begin(), batches.end())};
  std::string in_process_path;
  auto decode = InProcessDecode::Create(ip);
  if (decode.ok()) {
    in_process_path = (*decode)->Describe();
    out << "in-process: " << in_process_path << "\n" << std::flush;
    for (Row& r : rows) {
      auto f = (*decode)->Measure(r.batch);
      if (!f.ok()) return Annotate(f.status(), absl::StrCat("in-process batch ", r.batch));
      r.in_process = *f;
      out << absl::StrFormat("  batch %d: %.3f ms/step, %.1f tok/s\n", r.batch, f->ms_per_step, f->tokens_per_s)
          << std::flush;
    }
    decode->reset();
  } else if (decode.status().code() == absl::StatusCode::kFailedPrecondition) {
    in_process_path = "skipped: " + std::string(decode.status().message());
    out << "in-process: " << in_process_path << "\n";
  } else {
    return Annotate(decode.status(), "in-process baseline");
  }
  const Floor floor = MeasureFloor(o, *config);
  out << absl::StrFormat("floor: %.2f MB of weights + %.1f KB of KV per token of context per step / %.2f GB/s (%s)\n\n",
                         floor.step->DecodeStep(1, 0).weights * floor.readers / 1e6,
                         floor.step->kv_bytes_per_token() * floor.readers / 1e3, floor.bytes_per_s / 1e9,
                         floor.source);
  if (!o.json_out.empty()) {
    std::ofstream json(o.json_out);
    json << ToJson(o, *config, model_dir, in_process_path, floor, rows).dump(2) << "\n";
    if (!json) return absl::PermissionDeniedError(absl::StrCat("cannot write --json ", o.json_out));
  }
  PrintTable(rows, floor, out);
  out << "served ms/step: per sequence, first to last streamed token / the tokens after the first, median over "
         "sequences;\nserved/in-proc and served/floor: served ms/step over the baseline's (1: no serving overhead; "
         "served/floor: how many times\nthe time to read the weights and every sequence's KV over the context once); ITL: gaps between a sequence's "
         "successive tokens as the client read them\n";
  std::filesystem::remove_all(work);
  return absl::OkStatus();
}

}  // namespace seam::cli

// bench_load_setup.h: flags into load points, variants and a workload; the
// model's floor; the peaks of this machine.
#include "bench_load_setup.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpc_client.h"
#include "seam/core/status.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "source_commit.h"

namespace seam::cli {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<std::vector<std::string>> ParseTransports(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view t : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    if (t != "grpc" && t != "http") return Bad(absl::StrCat("--transport '", text, "': expected grpc, http or grpc,http"));
    if (std::find(out.begin(), out.end(), t) == out.end()) out.emplace_back(t);
  }
  if (out.empty()) return Bad("--transport: name grpc, http or both");
  return out;
}

std::string CheckLayout(const BenchLoadOptions& o) {
  if (o.pp < 1 || o.tp < 1 || o.attn_dp < 1 || o.tp % o.attn_dp != 0) {
    return "--pp, --tp and --attn-dp must be >= 1 and --attn-dp must divide --tp";
  }
  if (o.sessions < 1 || o.warmup < 0 || !(o.timeout_s > 0) || o.progress_s < 0 || o.slo_ttft_ms < 0 ||
      o.slo_tpot_ms < 0) {
    return "--sessions must be >= 1, --warmup >= 0, --timeout > 0, --progress and the --slo targets >= 0";
  }
  if (o.device != "cpu" && o.device != "cuda") return "--device must be cpu or cuda";
  if (o.dtype != "f32" && o.dtype != "bf16") return "--dtype must be f32 or bf16";
  if (!o.addr.empty() && (o.variants.size() > 1 || !o.stage_args.empty() || !o.coordinator_args.empty())) {
    return "--addr measures a running server: it takes no --variant list, --stage-arg or --coordinator-arg";
  }
  return o.model_dir.empty() && o.addr.empty() ? CheckRandomModelSizes(o.random, o.pp) : "";
}

// The model facts and topology of the coordinator at --addr.
absl::StatusOr<v1::Metadata> ServedMetadata(const BenchLoadOptions& o) {
  SEAM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, security::MakeChannel(o.security, o.addr));
  auto stub = v1::Coordinator::NewStub(channel);
  auto context = ContextWithTimeout(30);
  v1::Metadata metadata;
  const grpc::Status s = stub->GetMetadata(context.get(), v1::GetMetadataRequest(), &metadata);
  if (!s.ok()) return CallFailed(absl::StrCat("GetMetadata at ", o.addr, ": ", DescribeStatus(s)), s);
  return metadata;
}

absl::Status ParseWorkloadOptions(const BenchLoadOptions& o, int64_t vocab, WorkloadOptions* w) {
  SEAM_RETURN_IF_ERROR(ParseWorkloadShape(o.workload, w));
  absl::StatusOr<LengthDistribution> prompt = ParseLengthDistribution(o.prompt_len);
  if (!prompt.ok()) return Annotate(prompt.status(), "--prompt-len");
  absl::StatusOr<LengthDistribution> output = ParseLengthDistribution(o.output_len);
  if (!output.ok()) return Annotate(output.status(), "--output-len");
  w->prompt = *prompt;
  w->output = *output;
  w->sessions = o.sessions;
  w->vocab = vocab;
  w->seed = o.seed;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadVariant> ParseLoadVariant(const std::string& text) {
  const size_t colon = text.find(':');
  LoadVariant v;
  v.label = text.substr(0, colon);
  if (v.label.empty() || v.label.find_first_of(" /") != std::string::npos) {
    return Bad(absl::StrCat("--variant '", text, "': needs a label without spaces or '/' before any ':'"));
  }
  if (colon == std::string::npos) return v;
  for (absl::string_view arg : absl::StrSplit(text.substr(colon + 1), ' ', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&arg, "stage:") && !arg.empty()) {
      v.stage_args.emplace_back(arg);
    } else if (absl::ConsumePrefix(&arg, "coordinator:") && !arg.empty()) {
      v.coordinator_args.emplace_back(arg);
    } else {
      return Bad(absl::StrCat("--variant '", text, "': each argument after the label must be stage:--flag=value or "
                              "coordinator:--flag=value, got '", arg, "'"));
    }
  }
  return v;
}

absl::StatusOr<std::vector<LoadPoint>> ParseLoadPoints(const std::string& concurrency, const std::string& rates,
                                                       int sessions) {
  std::vector<LoadPoint> points;
  for (absl::string_view c : absl::StrSplit(concurrency, ',', absl::SkipEmpty())) {
    LoadPoint p;
    if (!absl::SimpleAtoi(c, &p.concurrency) || p.concurrency < 1) {
      return Bad(absl::StrCat("--concurrency '", concurrency, "': expected a list of counts >= 1, e.g. 1,8,64"));
    }
    points.push_back(p);
  }
  for (absl::string_view r : absl::StrSplit(rates, ',', absl::SkipEmpty())) {
    LoadPoint p;
    p.mode = LoadPoint::Mode::kOpen;
    if (r != "inf" && (!absl::SimpleAtod(r, &p.rate) || !(p.rate > 0) || std::isinf(p.rate))) {
      return Bad(absl::StrCat("--rates '", rates, "': expected a list of sessions/s > 0 or inf, e.g. 0.5,2,inf"));
    }
    points.push_back(p);
  }
  if (points.empty()) points.push_back(LoadPoint{LoadPoint::Mode::kClosed, sessions, 0});
  return points;
}

BenchLoadOptions WithSmokeDefaults(BenchLoadOptions o) {
  if (!o.smoke) return o;
  const BenchLoadOptions d;  // a flag left at its default takes the smoke test's value
  o.random = RandomModelSizes{std::max<int64_t>(2, o.pp), 64, 4, 2, 16, 128, 256};
  if (o.sessions == d.sessions) o.sessions = 6;
  if (o.prompt_len == d.prompt_len) o.prompt_len = "uniform:4:12";
  if (o.output_len == d.output_len) o.output_len = "4";
  if (o.concurrency.empty() && o.rates.empty()) o.concurrency = "3", o.rates = "inf";
  if (o.transports == d.transports) o.transports = "grpc,http";
  if (o.warmup == d.warmup) o.warmup = 1;
  return o;
}

absl::StatusOr<std::string> PrepareModel(const BenchLoadOptions& o, const std::string& work) {
  if (!o.model_dir.empty() || !o.addr.empty()) return o.model_dir;
  if (std::string bad = CheckLayout(o); !bad.empty()) return Bad(bad);
  const std::string dir = work + "/model";
  SEAM_RETURN_IF_ERROR(WriteRandomQwen3(o.random, o.dtype == "bf16" ? DType::kBF16 : DType::kF32, dir));
  return dir;
}

absl::StatusOr<LoadSetup> LoadSetup::Make(const BenchLoadOptions& o, const std::string& model_dir) {
  if (std::string bad = CheckLayout(o); !bad.empty()) return Bad(bad);
  LoadSetup s;
  SEAM_ASSIGN_OR_RETURN(s.transports, ParseTransports(o.transports));
  SEAM_ASSIGN_OR_RETURN(s.points, ParseLoadPoints(o.concurrency, o.rates, o.sessions));
  for (const std::string& text : o.variants) {
    SEAM_ASSIGN_OR_RETURN(LoadVariant v, ParseLoadVariant(text));
    for (const LoadVariant& seen : s.variants) {
      if (seen.label == v.label) return Bad(absl::StrCat("--variant: the label '", v.label, "' is used twice"));
    }
    s.variants.push_back(std::move(v));
  }
  if (s.variants.empty()) s.variants.push_back(LoadVariant{"default", {}, {}});
  s.target = LatencyTarget{o.slo_ttft_ms, o.slo_tpot_ms};
  s.pp = o.pp, s.tp = o.tp, s.attn_dp = o.attn_dp;
  int64_t vocab = 0;
  if (!o.addr.empty()) {  // the running server's own vocabulary and layout
    SEAM_ASSIGN_OR_RETURN(const v1::Metadata served, ServedMetadata(o));
    vocab = served.model().vocab_size();
    s.pp = static_cast<int>(std::max(1u, served.topology().pipeline_size()));
    s.tp = static_cast<int>(std::max(1u, served.topology().tp_size()));
    s.attn_dp = static_cast<int>(std::max(1u, served.topology().attn_dp_size()));
    s.model_summary = absl::StrCat("the model at ", o.addr);
  }
  if (!model_dir.empty()) {
    absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(model_dir);
    if (!config.ok()) return Bad(absl::StrCat("--model: ", config.status().message()));
    if (!o.addr.empty() && config->vocab_size != vocab) {
      return Bad(absl::StrCat("--model's vocabulary (", config->vocab_size, ") is not the served model's (", vocab,
                              "): pass the served checkpoint"));
    }
    s.config_ = *config;
    vocab = config->vocab_size;
    runtime::StepFloorOptions f;
    f.weight_dtype = f.cache_dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
    f.tp = s.tp, f.attn_dp = s.attn_dp;
    s.floor_ = runtime::StepFloor::Of(*config, f);
    s.model_summary = absl::StrFormat("%s, %d layers, hidden %d, %s, %s", config->architecture,
                                      config->num_hidden_layers, config->hidden_size, o.dtype, o.device);
  }
  SEAM_RETURN_IF_ERROR(ParseWorkloadOptions(o, vocab, &s.workload));
  return s;
}

void LoadSetup::MeasurePeaks(const BenchLoadOptions& o, const Workload& w, std::ostream& out) {
  if (o.no_ideal || !floor_) {
    peaks_source_ = o.no_ideal ? "not measured (--no-ideal)"
                               : "not measured: the ideal needs the served checkpoint's config (--model DIR)";
    return;
  }
  const bool gpu = o.device == "cuda";
  const Device device = gpu ? Device::CUDA(0) : Device::CPU();
  const DType dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const size_t copy_bytes = gpu ? size_t{1} << 30 : o.smoke ? size_t{32} << 20 : size_t{256} << 20;
  const int64_t rows = std::clamp<int64_t>(w.prompt_tokens(), 1, gpu ? 8192 : o.smoke ? 64 : 512);
  absl::StatusOr<double> copy = runtime::CopyBytesPerSecond(device, copy_bytes, threads);
  absl::StatusOr<runtime::MatmulPeak> peak = absl::UnknownError("the copy bandwidth was not measured");
  if (copy.ok()) peak = runtime::BestMatmulFlopsPerSecond(device, dtype, *config_, rows);
  if (!copy.ok() || !peak.ok()) {
    peaks_source_ = absl::StrCat("not measured: ", (copy.ok() ? peak.status() : copy.status()).message());
    out << "peaks: " << peaks_source_ << "\n";
    return;
  }
  rates_ = IdealRates{peak->flops_per_s, *copy, gpu ? 1 : tp};
  gemm_shape_ = peak->best;
  std::vector<std::string> by_shape;
  for (const auto& [shape, rate] : peak->rates) {
    // On a GPU, each shape also on constant data: stated beside the peak, never used.
    double constant = 0;
    if (gpu) constant = runtime::MatmulFlopsPerSecond(device, dtype, shape, runtime::MatmulData::kConstant).value_or(0);
    shape_rates_.push_back({shape, rate, constant});
    by_shape.push_back(absl::StrFormat("%s %.4g", shape.name, rate / 1e12) +
                       (constant > 0 ? absl::StrFormat(" (%.4g)", constant / 1e12) : ""));
  }
  peaks_source_ = gpu ? absl::StrFormat("GPU 0: a device-to-device copy of %d MiB; %s matmuls", copy_bytes >> 20,
                                        o.dtype)
                      : absl::StrFormat("host: memcpy of %d MiB on %d threads; %s matmuls on the CPU math library's "
                                        "threads (shared by %d TP ranks)",
                                        copy_bytes >> 20, threads, o.dtype, tp);
  out << absl::StrFormat("peaks: copy %.2f GB/s, matmul %.2f TFLOP/s on random data (best at %d x %d x %d); %s\n",
                         *copy / 1e9, peak->flops_per_s / 1e12, gemm_shape_.m, gemm_shape_.n, gemm_shape_.k,
                         peaks_source_);
  out << "  matmul TFLOP/s by shape on random data" << (gpu ? " (on constant data, not used)" : "") << ": "
      << absl::StrJoin(by_shape, ", ") << "\n";
}

std::optional<IdealLoad> LoadSetup::Ideal(const Workload& w, const LoadPoint& point, uint64_t seed) const {
  if (!floor_ || rates_.flops_per_s <= 0) return std::nullopt;
  return IdealLoadTime(w, point, SessionArrivals(w, point, seed), *floor_, rates_);
}

std::string LoadSetup::Banner(const BenchLoadOptions& o, const Workload& w) const {
  std::vector<std::string> points, labels;
  for (const LoadPoint& p : this->points) points.push_back(p.Label());
  for (const LoadVariant& v : variants) labels.push_back(v.label);
  return absl::StrFormat(
      "seam bench load%s: %s\n  workload %s: %d sessions, %d requests, prompts %s, outputs %s (seed %d): %d prompt "
      "and %d output tokens\n  layout PP %d x TP %d, attention DP %d; transports %s; load points %s; variants %s\n",
      o.smoke ? " --smoke" : "", model_summary, WorkloadShapeName(w.options), w.sessions.size(), w.requests(),
      w.options.prompt.ToString(), w.options.output.ToString(), w.options.seed, w.prompt_tokens(), w.output_tokens(),
      pp, tp, attn_dp, absl::StrJoin(transports, ","), absl::StrJoin(points, ", "), absl::StrJoin(labels, ", "));
}

Json LoadSetup::Describe(const BenchLoadOptions& o, const Workload& w, const std::string& model_dir) const {
  Json model = {{"dir", model_dir}, {"random", o.model_dir.empty() && o.addr.empty()}, {"summary", model_summary}};
  if (config_) {
    model.update({{"architecture", config_->architecture}, {"layers", config_->num_hidden_layers},
                  {"hidden", config_->hidden_size}, {"heads", config_->num_attention_heads},
                  {"kv_heads", config_->num_key_value_heads}, {"head_dim", config_->head_dim},
                  {"vocab", config_->vocab_size}, {"kv_bytes_per_token_per_rank", floor_->kv_bytes_per_token()}});
  }
  Json peaks = {{"source", peaks_source_}, {"copy_bytes_per_s", nullptr}, {"matmul_flops_per_s", nullptr}};
  if (rates_.flops_per_s > 0) {
    peaks.update({{"copy_bytes_per_s", rates_.bytes_per_s}, {"matmul_flops_per_s", rates_.flops_per_s},
                  {"matmul_best_shape", {gemm_shape_.m, gemm_shape_.n, gemm_shape_.k}},
                  {"ranks_sharing", rates_.ranks_sharing}, {"matmul_data", "random"}});
    Json by_shape = Json::array();
    for (const ShapeRate& r : shape_rates_) {
      by_shape.push_back({{"shape", r.shape.name}, {"mnk", {r.shape.m, r.shape.n, r.shape.k}},
                          {"random_flops_per_s", r.random}, {"constant_flops_per_s", r.constant > 0 ? Json(r.constant)
                                                                                                     : Json(nullptr)}});
    }
    peaks["matmul_by_shape"] = by_shape;
  }
  Json variants_json = Json::array();
  for (const LoadVariant& v : variants) {
    variants_json.push_back({{"label", v.label}, {"stage_args", v.stage_args}, {"coordinator_args", v.coordinator_args}});
  }
  return {{"commit", SourceCommit()},
          {"target", o.addr.empty() ? Json("local pipeline") : Json(o.addr)},
          {"model", model},
          {"layout", {{"pp", pp}, {"tp", tp}, {"attn_dp", attn_dp}}},
          {"device", o.device},
          {"dtype", o.dtype},
          {"cores", std::thread::hardware_concurrency()},
          {"workload", {{"shape", WorkloadShapeName(w.options)}, {"sessions", w.sessions.size()},
                        {"requests", w.requests()}, {"prompt", w.options.prompt.ToString()},
                        {"output", w.options.output.ToString()}, {"seed", w.options.seed},
                        {"prompt_tokens", w.prompt_tokens()}, {"output_tokens", w.output_tokens()},
                        {"longest_context", w.longest_context()}}},
          {"latency_target", {{"ttft_ms", target.ttft_ms}, {"tpot_ms", target.tpot_ms}}},
          {"peaks", peaks},
          {"transports", transports},
          {"variants", variants_json},
          {"ideal_composition", "prefill of every prompt at the matmul peak (random data), then decode steps at the "
                                "copy bandwidth "
                                "(weights + each sequence's KV + Mamba state, runtime/step_floor.h), replayed with "
                                "the load's arrivals and concurrency (cli/src/load_ideal.h)"}};
}

std::string LoadSetup::Notes() const {
  return "\nwall s: first request sent to the last answer's end; x ideal: wall s over the ideal of the same load "
         "(prefill at the matmul peak on random data + decode steps\nat weights + KV bytes / copy bandwidth, measured "
         "above); "
         "seen: token (gRPC stamps every token), chunk (HTTP stamps text chunks,\nwhich may hold several tokens) "
         "or none (the model has no tokenizer.json: the HTTP stream holds no text before its end, so TTFT\nand "
         "ITL cannot be seen there); TPOT: a request's (last token - first token) / (tokens - 1); goodput: "
         "requests within the\nlatency target (--slo-ttft-ms, --slo-tpot-ms) per second of wall time; busy: a "
         "stage's compute (seam:stage_step_seconds,\nread from its /metrics around the point) over wall s, the rest "
         "spent waiting (descriptors, handoffs, the scheduler); graph: steps\nreplayed from a CUDA graph; n/a: the "
         "stage's /metrics could not be read (the JSON has the error)\n";
}

}  // namespace seam::cli

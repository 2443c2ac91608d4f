// seam-stage: one pipeline stage server process. Parses its flags into the
// StageServerOptions (OptionsFrom, the one place), starts the StageServer,
// writes the bound port for whoever started it, and turns SIGTERM / SIGINT
// into a graceful drain and exit.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "seam/core/device_memory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "seam/core/logging.h"
#include "seam/core/progress.h"
#include "seam/security/credentials.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/variant_choice.h"
#include "seam/core/status.h"
#include "seam/kernels/programmatic_launch.h"
#include "seam/server/stage_server.h"

namespace {

// SIGTERM / SIGINT: the handler only writes the signal number to a pipe (any
// thread may take the signal, some are started by libraries before main);
// a watcher thread reads it and asks the server to shut down.
int signal_pipe[2] = {-1, -1};

void OnSignal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] ssize_t n = write(signal_pipe[1], &byte, 1);
}

bool InstallSignalHandlers() {
  if (pipe(signal_pipe) != 0) return false;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0;
}

// Writes the port to `path` through a temporary file and a rename, so a
// reader never sees a partial number.
bool WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// The flags that are not fields of StageServerOptions as they are: text
// that OptionsFrom turns into the options, in one place.
struct StageFlags {
  std::string ucx_mode = "tcp", log_level = "info", log_format = "text", device = "cpu", port_file, metrics_listen;
  std::string served_model_name;
  double handoff_timeout_s = 10.0, drain_timeout_s = 20.0;
  std::string dtype = "f32", allreduce_fusion = "auto", reduction_policy = "auto", batch_variant = "auto";
  int64_t kv_cache_bytes = 0;
  std::string graph_buckets = "1,2,4,8,16,32,64,128,256";
  std::string mixed_graph_rows = "64,128,192,256,384,512,768,1024,1536,2048,3072,4096,6144,8192";
  std::string moe_experts = "auto", mamba_scan = "auto", handoff_transport = "host", run_ahead = "on", pdl = "off";
  seam::security::ServerSecurityOptions security;
};

void AddServerFlags(CLI::App& app, StageFlags& f, seam::server::StageServerOptions& o) {
  app.add_option("--listen", o.listen, "host:port for the gRPC server (port 0: any free port)")->capture_default_str();
  app.add_option("--port-file", f.port_file, "write the bound port to this file once serving");
  app.add_option("--ucx-mode", f.ucx_mode, "data plane: tcp (detects dead peers) or shm (shared memory)")
      ->capture_default_str();
  app.add_option("--handoff-timeout", f.handoff_timeout_s,
                 "seconds a microbatch without a budget (MicrobatchDescriptor.budget_ms) waits for a neighbour's "
                 "handoff; a budgeted one waits until its budget is spent")
      ->capture_default_str();
  app.add_option("--drain-timeout", f.drain_timeout_s, "seconds a shutdown waits for in-flight microbatches")
      ->capture_default_str();
  app.add_option("--handoff-transport", f.handoff_transport,
                 "CUDA: how handoffs reach the next stage: auto (GPU to GPU through CUDA IPC when the next stage "
                 "is on this host and can reach this stage's GPUs, else through host memory over UCX) or host "
                 "(the default: on an H200 the device link took 188 us one way where the host path took 87 us; "
                 "bench/results/2026-12-01-h200-multistep)")
      ->check(CLI::IsMember({"auto", "host"}))
      ->capture_default_str();
  app.add_option("--run-ahead", f.run_ahead,
                 "CUDA, whole model on one GPU: at the end of a multi-step decode wave, run the step after it on "
                 "the device while the last answer travels, and use it when the next wave continues those "
                 "sequences (on) or not (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn or error")->capture_default_str();
  app.add_option("--log-format", f.log_format, "text or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--metrics-listen", f.metrics_listen,
                 "host:port of a Prometheus /metrics endpoint: HTTPS with --tls-cert/--tls-key, else plain HTTP on "
                 "loopback only unless --insecure");
  app.add_option("--served-model-name", f.served_model_name,
                 "the model's served name: a model_name label on every /metrics series (as the coordinator's)");
  app.add_option("--tls-cert", f.security.tls_cert_file, "PEM certificate chain: serve StageControl over TLS");
  app.add_option("--tls-key", f.security.tls_key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", f.security.tls_client_ca_file,
                 "PEM CA: require a client certificate it signed (mutual TLS; the coordinator's "
                 "--tls-client-cert)");
  app.add_flag("--insecure", f.security.insecure,
               "allow plaintext on a non-loopback --listen (anyone reaching the port can drive the stage)");
  app.add_option("--health-listen", o.health_listen,
                 "host:port of a plaintext port serving only grpc.health.v1 (for probes that cannot speak TLS)");
}

void AddComputeFlags(CLI::App& app, StageFlags& f, seam::runtime::StageGroupOptions& g) {
  app.add_option("--device", f.device,
                 "where the stage computes: cpu, cuda (TP rank r on GPU r; needs tp GPUs) or auto (cuda when a GPU "
                 "is visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  app.add_option("--first-gpu", g.first_gpu, "CUDA: TP rank r computes on GPU first-gpu + r")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--dtype", f.dtype,
                 "weights, activations and handoffs: f32 or bf16 (every stage of a pipeline alike; logits stay f32)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_option("--allreduce-fusion", f.allreduce_fusion,
                 "CUDA bf16 TP groups: the one-shot IPC all-reduce + add + RMSNorm at stage inputs: off, auto (where "
                 "a start-up measurement finds it no slower than NCCL + the fused add+norm) or always")
      ->check(CLI::IsMember({"off", "auto", "always"}))
      ->capture_default_str();
  app.add_option("--moe-experts", f.moe_experts,
                 "MoE models: auto (on GPUs grouped on the device at every batch size, so every step can replay "
                 "a CUDA graph: per batch size the faster of the fused kernels and the earlier grouped GEMV as "
                 "timed at load, once per expert shape; "
                 "on the host each expert's rows through its own matmuls), fused (the fused kernels on every "
                 "device), grouped (the earlier grouped GEMV on every device, where a batch fits), per-expert "
                 "(always one by one) or classic (the earlier default: grouped up to 1024 routes on GPUs, else "
                 "one by one)")
      ->check(CLI::IsMember({"auto", "fused", "grouped", "per-expert", "classic"}))
      ->capture_default_str();
  app.add_option("--mamba-scan", f.mamba_scan,
                 "Nemotron-H: auto (on GPUs prefills run the Mamba2 scan as the chunked SSD on tensor cores, "
                 "decode as the sequential recurrence) or sequential (the sequential kernel for every step)")
      ->check(CLI::IsMember({"auto", "sequential"}))
      ->capture_default_str();
  app.add_option("--pdl", f.pdl,
                 "CUDA, compute capability 9.0 and later: programmatic dependent launch of the decode step's "
                 "kernels (each may start while the one before drains; outputs are the same): on or off (off by "
                 "default: on an H200 it changed decode steps by 1 % or less)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--graph-buckets", f.graph_buckets,
                 "CUDA: decode steps replay CUDA graphs captured at start-up for these sequence counts per "
                 "attention-DP group (ascending, comma-separated; a step pads up to the next one); off or empty: eager")
      ->capture_default_str();
  app.add_option("--mixed-graph-rows", f.mixed_graph_rows,
                 "CUDA: steps holding prefill chunks replay CUDA graphs captured at start-up for these token rows "
                 "per attention-DP group (ascending, comma-separated; a step pads up to the next one; rows past "
                 "--max-step-tokens are dropped); off or empty: such steps run eagerly")
      ->capture_default_str();
  app.add_option("--fed-decode-max-tp", g.fed_decode_max_tp,
                 "CUDA: the largest TP size whose decode waves feed each step's tokens to the next on the device "
                 "(TP rank 0 chooses and broadcasts); larger groups send each step's tokens through the host")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void AddBatchFlags(CLI::App& app, StageFlags& f, seam::runtime::StageGroupOptions& g) {
  app.add_option("--reduction-policy", f.reduction_policy,
                 "FFN output transports the boundaries may use: ar, rs, rsv, rs+rsv or auto (per architecture)")
      ->check(CLI::IsMember({"ar", "rs", "rsv", "rs+rsv", "auto"}))
      ->capture_default_str();
  app.add_option("--batch-variant", f.batch_variant,
                 "how batches move over TP: auto (per batch: unpadded when rows do not divide over attention TP, "
                 "input-scattered from --scatter-input-rows, else ordinary), sequence-parallel, or one variant for "
                 "every batch (ordinary, unpadded, input-scattered); context-parallel: every prefill batch runs "
                 "context-parallel (with --cp > 1)")
      ->check(CLI::IsMember({"auto", "sequence-parallel", "sp", "context-parallel", "cp", "ordinary", "unpadded",
                             "input-scattered"}))
      ->capture_default_str();
  app.add_option("--cp", g.attn_cp,
                 "context-parallel ranks in the TP group (without attention DP): attention is split over tp / cp "
                 "ranks and a long prefill's tokens over the CP ranks (zig-zag); decode runs ordinary")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cp-min-rows", g.variants.cp_min_rows,
                 "--batch-variant auto with --cp > 1: a prefill batch of this many rows runs context-parallel")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--scatter-input-rows", g.variants.scatter_input_rows,
                 "--batch-variant auto: a batch whose largest attention-DP group has this many rows runs "
                 "input-scattered")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void AddMemoryFlags(CLI::App& app, StageFlags& f, seam::runtime::StageGroupOptions& g) {
  app.add_option("--kv-cache-bytes", f.kv_cache_bytes,
                 "bytes of KV cache per rank (default: 1 GiB on the host; on GPUs the memory fraction decides)");
  app.add_option("--kv-memory-fraction", g.kv.memory_fraction,
                 "GPUs: share of each GPU's memory this stage may fill with weights, activations and KV cache")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--max-step-tokens", g.kv.max_step_tokens,
                 "largest step in token rows (over all attention-DP groups): sizes the activation reserve kept free "
                 "beside the KV cache on GPUs, and the coordinator's microbatches (it reads this stage's limits)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--state-sequences", g.cache.max_state_sequences,
                 "models with Mamba layers: sequences each attention-DP group keeps state for at once, out of the "
                 "KV budget (0: as many as a quarter of it holds, at most 256); reported to the coordinator, which "
                 "admits no more")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

absl::StatusOr<std::vector<int64_t>> ParseGraphBuckets(const std::string& text,
                                                       absl::string_view flag = "--graph-buckets") {
  std::vector<int64_t> buckets;
  if (text == "off") return buckets;
  for (absl::string_view b : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t bucket = 0;
    if (!absl::SimpleAtoi(b, &bucket) || bucket <= 0 || (!buckets.empty() && bucket <= buckets.back())) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected ascending positive counts, got \"", text, "\""));
    }
    buckets.push_back(bucket);
  }
  return buckets;
}

// The options from the flags; INVALID_ARGUMENT (or FAILED_PRECONDITION for a
// missing GPU) naming the flag.
absl::Status OptionsFrom(const StageFlags& f, seam::server::StageServerOptions& o) {
  absl::StatusOr<seam::server::UcxMode> mode = seam::server::ParseUcxMode(f.ucx_mode);
  if (!mode.ok()) return absl::InvalidArgumentError(absl::StrCat("--ucx-mode: ", mode.status().message()));
  o.ucx_mode = *mode;
  if (!f.metrics_listen.empty()) {
    o.metrics.listen = f.metrics_listen;  // HTTPS with StageControl's certificate when it has one
    o.metrics.tls_cert_file = f.security.tls_cert_file;
    o.metrics.tls_key_file = f.security.tls_key_file;
    o.metrics.insecure = f.security.insecure;
    if (!f.served_model_name.empty()) o.metrics.constant_labels = {{"model_name", f.served_model_name}};
  }
  SEAM_ASSIGN_OR_RETURN(o.credentials, seam::security::MakeServerCredentials(f.security, o.listen));
  o.handoff_timeout = absl::Seconds(f.handoff_timeout_s);
  o.drain_timeout = absl::Seconds(f.drain_timeout_s);
  o.run_ahead = f.run_ahead == "on";
  seam::kernels::SetProgrammaticLaunch(f.pdl == "on");
  const bool cuda = f.device == "cuda" || (f.device == "auto" && seam::CudaAvailable());
  if (cuda && !seam::CudaAvailable()) {
    return absl::FailedPreconditionError("--device cuda: no GPU is visible (or this build has no CUDA path)");
  }
  seam::runtime::StageGroupOptions& g = o.group;
  g.device = cuda ? seam::Device::Kind::kCUDA : seam::Device::Kind::kCPU;
  g.model.dtype = f.dtype == "bf16" ? seam::DType::kBF16 : seam::DType::kF32;
  g.model.moe_experts = *seam::models::ParseMoeExperts(f.moe_experts);  // one of the checked choices
  g.model.mamba_scan = f.mamba_scan == "sequential" ? seam::kernels::ScanAlgorithm::kSequential
                                                    : seam::kernels::ScanAlgorithm::kAuto;
  g.allreduce_fusion.mode = *seam::boundary::ParseAllReduceFusionMode(f.allreduce_fusion);
  o.policy = *seam::boundary::ParseReductionPolicy(f.reduction_policy);
  const seam::boundary::VariantChoiceOptions parsed = *seam::boundary::ParseVariantChoice(f.batch_variant);
  g.variants.mode = parsed.mode;
  g.variants.fixed = parsed.fixed;
  // KV from memory on GPUs unless a byte budget is given; the byte budget on the host.
  g.kv.from_gpu_memory = f.kv_cache_bytes <= 0;
  if (f.kv_cache_bytes > 0) g.kv.cache_bytes = f.kv_cache_bytes;
  SEAM_ASSIGN_OR_RETURN(g.graph_buckets, ParseGraphBuckets(f.graph_buckets));
  SEAM_ASSIGN_OR_RETURN(g.mixed_graph_rows, ParseGraphBuckets(f.mixed_graph_rows, "--mixed-graph-rows"));
  // Handoffs stay on the GPUs for a device link; the link copies them to the host when it has none.
  g.handoff_on_device = cuda && f.handoff_transport == "auto";
  return absl::OkStatus();
}

// Serves until a signal: writes the port file, then waits for the shutdown.
int Serve(const seam::server::StageServerOptions& options, const std::string& port_file) {
  absl::StatusOr<std::unique_ptr<seam::server::StageServer>> server = seam::server::StageServer::Start(options);
  if (!server.ok()) {
    std::cerr << "seam-stage: " << server.status().ToString() << "\n";
    return absl::IsFailedPrecondition(server.status()) ? 2 : 1;
  }
  if (!port_file.empty() && !WritePortFile(port_file, (*server)->port())) {
    std::cerr << "seam-stage: cannot write --port-file " << port_file << "\n";
    return 1;
  }
  seam::server::StageServer* s = server->get();
  if (s->metrics_port() != 0) SEAM_LOG_INFO("metrics on port {}", s->metrics_port());
  std::thread([s] {
    char received = 0;
    while (read(signal_pipe[0], &received, 1) < 0 && errno == EINTR) {
    }
    SEAM_LOG_INFO("signal {}: shutting down", static_cast<int>(received));
    s->RequestShutdown();
  }).detach();
  absl::Status stopped = s->Wait();
  if (!stopped.ok()) {
    SEAM_LOG_ERROR("{}", stopped.ToString());
    std::_Exit(1);  // in-flight work would keep the process past its bound
  }
  server->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seam-stage: serves one pipeline stage of a transformer language model"};
  StageFlags flags;
  seam::server::StageServerOptions options;
  AddServerFlags(app, flags, options);
  AddComputeFlags(app, flags, options.group);
  AddBatchFlags(app, flags, options.group);
  AddMemoryFlags(app, flags, options.group);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  seam::LogFormat format = seam::LogFormat::kText;
  seam::ParseLogFormat(flags.log_format, &format);
  seam::InitLogging(flags.log_level, "stage", format);
  seam::SetProgressMode(seam::ProgressMode::kAuto);  // loading weights, the KV cache
  if (!InstallSignalHandlers()) {
    std::cerr << "seam-stage: cannot install signal handlers\n";
    return 1;
  }
  if (absl::Status s = OptionsFrom(flags, options); !s.ok()) {
    std::cerr << "seam-stage: " << s.message() << "\n";
    return 2;
  }
  return Serve(options, flags.port_file);
}

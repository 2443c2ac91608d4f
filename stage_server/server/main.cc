// seam-stage: one pipeline stage server process. Parses its flags, starts the
// StageServer, writes the bound port for whoever started it, and turns
// SIGTERM / SIGINT into a graceful drain and exit.
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
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "seam/core/logging.h"
#include "seam/core/progress.h"
#include "seam/security/credentials.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/variant_choice.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seam-stage: serves one pipeline stage of a transformer language model"};
  std::string listen = "127.0.0.1:0", port_file, ucx_mode = "tcp", log_level = "info", device = "cpu";
  double handoff_timeout_s = 10.0, drain_timeout_s = 20.0;
  app.add_option("--listen", listen, "host:port for the gRPC server (port 0: any free port)")->capture_default_str();
  app.add_option("--port-file", port_file, "write the bound port to this file once serving");
  app.add_option("--ucx-mode", ucx_mode, "data plane: tcp (detects dead peers) or shm (shared memory)")
      ->capture_default_str();
  app.add_option("--handoff-timeout", handoff_timeout_s, "seconds a microbatch waits for a neighbour's handoff")
      ->capture_default_str();
  app.add_option("--drain-timeout", drain_timeout_s, "seconds a shutdown waits for in-flight microbatches")
      ->capture_default_str();
  app.add_option("--device", device,
                 "where the stage computes: cpu, cuda (TP rank r on GPU r; needs tp GPUs) or auto (cuda when a GPU "
                 "is visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  int first_gpu = 0;
  app.add_option("--first-gpu", first_gpu, "CUDA: TP rank r computes on GPU first-gpu + r")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string dtype = "f32", allreduce_fusion = "auto";
  app.add_option("--dtype", dtype,
                 "weights, activations and handoffs: f32 or bf16 (every stage of a pipeline alike; logits stay f32)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_option("--allreduce-fusion", allreduce_fusion,
                 "CUDA bf16 TP groups: the one-shot IPC all-reduce + add + RMSNorm at stage inputs: off, auto (where "
                 "a start-up measurement finds it no slower than NCCL + the fused add+norm) or always")
      ->check(CLI::IsMember({"off", "auto", "always"}))
      ->capture_default_str();
  std::string reduction_policy = "auto", batch_variant = "auto";
  int64_t scatter_input_rows = 1024, cp_min_rows = 1024;
  int cp = 1;
  app.add_option("--reduction-policy", reduction_policy,
                 "FFN output transports the boundaries may use: ar, rs, rsv, rs+rsv or auto (per architecture)")
      ->check(CLI::IsMember({"ar", "rs", "rsv", "rs+rsv", "auto"}))
      ->capture_default_str();
  app.add_option("--batch-variant", batch_variant,
                 "how batches move over TP: auto (per batch: unpadded when rows do not divide over attention TP, "
                 "input-scattered from --scatter-input-rows, else ordinary), sequence-parallel, or one variant for "
                 "every batch (ordinary, unpadded, input-scattered); context-parallel: every prefill batch runs "
                 "context-parallel (with --cp > 1)")
      ->check(CLI::IsMember({"auto", "sequence-parallel", "sp", "context-parallel", "cp", "ordinary", "unpadded",
                             "input-scattered"}))
      ->capture_default_str();
  app.add_option("--cp", cp,
                 "context-parallel ranks in the TP group (without attention DP): attention is split over tp / cp "
                 "ranks and a long prefill's tokens over the CP ranks (zig-zag); decode runs ordinary")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cp-min-rows", cp_min_rows,
                 "--batch-variant auto with --cp > 1: a prefill batch of this many rows runs context-parallel")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--scatter-input-rows", scatter_input_rows,
                 "--batch-variant auto: a batch whose largest attention-DP group has this many rows runs "
                 "input-scattered")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  int64_t kv_cache_bytes = 0;
  double kv_memory_fraction = 0.9;
  int64_t max_step_tokens = 8192;
  app.add_option("--kv-cache-bytes", kv_cache_bytes,
                 "bytes of KV cache per rank (default: 1 GiB on the host; on GPUs the memory fraction decides)");
  app.add_option("--kv-memory-fraction", kv_memory_fraction,
                 "GPUs: share of each GPU's memory this stage may fill with weights, activations and KV cache")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--max-step-tokens", max_step_tokens,
                 "largest step in tokens; sizes the activation reserve kept free beside the KV cache on GPUs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::string graph_buckets = "1,2,4,8,16,32,64,128";
  app.add_option("--graph-buckets", graph_buckets,
                 "CUDA: decode steps replay CUDA graphs captured at start-up for these sequence counts per "
                 "attention-DP group (ascending, comma-separated; a step pads up to the next one); empty: eager")
      ->capture_default_str();
  std::string moe_experts = "auto";
  app.add_option("--moe-experts", moe_experts,
                 "MoE models: auto (on GPUs the fused expert kernels at every batch size, grouped on the device "
                 "so every step can replay a CUDA graph: a GEMV for decode-sized batches, tensor-core tiles above; "
                 "on the host each expert's rows through its own matmuls), fused (the fused kernels on every "
                 "device), grouped (the earlier grouped GEMV on every device, where a batch fits), per-expert "
                 "(always one by one) or classic (the earlier default: grouped up to 1024 routes on GPUs, else "
                 "one by one)")
      ->check(CLI::IsMember({"auto", "fused", "grouped", "per-expert", "classic"}))
      ->capture_default_str();
  std::string mamba_scan = "auto";
  app.add_option("--mamba-scan", mamba_scan,
                 "Nemotron-H: auto (on GPUs prefills run the Mamba2 scan as the chunked SSD on tensor cores, "
                 "decode as the sequential recurrence) or sequential (the sequential kernel for every step)")
      ->check(CLI::IsMember({"auto", "sequential"}))
      ->capture_default_str();
  std::string handoff_transport = "host";
  app.add_option("--handoff-transport", handoff_transport,
                 "CUDA: how handoffs reach the next stage: auto (GPU to GPU through CUDA IPC when the next stage "
                 "is on this host and can reach this stage's GPUs, else through host memory over UCX) or host "
                 "(the default: on an H200 the device link took 188 us one way where the host path took 87 us; "
                 "bench/results/2026-12-01-h200-multistep)")
      ->check(CLI::IsMember({"auto", "host"}))
      ->capture_default_str();
  int fed_decode_max_tp = 1;
  app.add_option("--fed-decode-max-tp", fed_decode_max_tp,
                 "CUDA: the largest TP size whose decode waves feed each step's tokens to the next on the device "
                 "(TP rank 0 chooses and broadcasts); larger groups send each step's tokens through the host")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::string run_ahead = "on";
  app.add_option("--run-ahead", run_ahead,
                 "CUDA, whole model on one GPU: at the end of a multi-step decode wave, run the step after it on "
                 "the device while the last answer travels, and use it when the next wave continues those "
                 "sequences (on) or not (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")->capture_default_str();
  std::string log_format = "text", metrics_listen;
  app.add_option("--log-format", log_format, "text or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen,
                 "host:port of a Prometheus /metrics endpoint: HTTPS with --tls-cert/--tls-key, else plain HTTP on "
                 "loopback only unless --insecure");
  seam::security::ServerSecurityOptions security;
  std::string health_listen;
  app.add_option("--tls-cert", security.tls_cert_file, "PEM certificate chain: serve StageControl over TLS");
  app.add_option("--tls-key", security.tls_key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", security.tls_client_ca_file,
                 "PEM CA: require a client certificate it signed (mutual TLS; the coordinator's "
                 "--tls-client-cert)");
  app.add_flag("--insecure", security.insecure,
               "allow plaintext on a non-loopback --listen (anyone reaching the port can drive the stage)");
  app.add_option("--health-listen", health_listen,
                 "host:port of a plaintext port serving only grpc.health.v1 (for probes that cannot speak TLS)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  seam::LogFormat format = seam::LogFormat::kText;
  seam::ParseLogFormat(log_format, &format);
  seam::InitLogging(log_level, "stage", format);
  seam::SetProgressMode(seam::ProgressMode::kAuto);  // loading weights, the KV cache
  if (!InstallSignalHandlers()) {
    std::cerr << "seam-stage: cannot install signal handlers\n";
    return 1;
  }

  absl::StatusOr<seam::server::UcxMode> mode = seam::server::ParseUcxMode(ucx_mode);
  if (!mode.ok()) {
    std::cerr << "seam-stage: --ucx-mode: " << mode.status().message() << "\n";
    return 2;
  }
  seam::server::StageServerOptions options;
  options.listen = listen;
  options.health_listen = health_listen;
  if (!metrics_listen.empty()) {
    options.metrics.listen = metrics_listen;  // HTTPS with StageControl's certificate when it has one
    options.metrics.tls_cert_file = security.tls_cert_file;
    options.metrics.tls_key_file = security.tls_key_file;
    options.metrics.insecure = security.insecure;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      seam::security::MakeServerCredentials(security, listen);
  if (!credentials.ok()) {
    std::cerr << "seam-stage: " << credentials.status().message() << "\n";
    return 2;
  }
  options.credentials = *credentials;
  options.ucx_mode = *mode;
  options.handoff_timeout = absl::Seconds(handoff_timeout_s);
  options.run_ahead = run_ahead == "on";
  options.drain_timeout = absl::Seconds(drain_timeout_s);
  const bool cuda = device == "cuda" || (device == "auto" && seam::CudaAvailable());
  if (cuda && !seam::CudaAvailable()) {
    std::cerr << "seam-stage: --device cuda: no GPU is visible (or this build has no CUDA path)\n";
    return 2;
  }
  seam::runtime::StageGroupOptions& group = options.group;
  group.device = cuda ? seam::Device::Kind::kCUDA : seam::Device::Kind::kCPU;
  group.first_gpu = first_gpu;
  group.dtype = dtype == "bf16" ? seam::DType::kBF16 : seam::DType::kF32;
  group.allreduce_fusion.mode = *seam::boundary::ParseAllReduceFusionMode(allreduce_fusion);
  options.policy = *seam::boundary::ParseReductionPolicy(reduction_policy);
  group.variants = *seam::boundary::ParseVariantChoice(batch_variant);
  group.variants.scatter_input_rows = scatter_input_rows;
  group.variants.cp_min_rows = cp_min_rows;
  group.attn_cp = cp;
  // KV from memory on GPUs unless a byte budget is given; the byte budget on the host.
  group.kv.from_gpu_memory = kv_cache_bytes <= 0;
  if (kv_cache_bytes > 0) group.kv.cache_bytes = kv_cache_bytes;
  group.kv.memory_fraction = kv_memory_fraction;
  group.kv.max_step_tokens = max_step_tokens;
  for (absl::string_view b : absl::StrSplit(graph_buckets, ',', absl::SkipWhitespace())) {
    int64_t bucket = 0;
    if (!absl::SimpleAtoi(b, &bucket) || bucket <= 0 ||
        (!group.graph_buckets.empty() && bucket <= group.graph_buckets.back())) {
      std::cerr << "seam-stage: --graph-buckets: expected ascending positive counts, got \"" << graph_buckets
                << "\"\n";
      return 2;
    }
    group.graph_buckets.push_back(bucket);
  }
  group.graph_capture_at_start = true;
  // Handoffs stay on the GPUs for a device link; the link copies them to the host when it has none.
  group.handoff_on_device = cuda && handoff_transport == "auto";
  group.fed_decode_max_tp = fed_decode_max_tp;
  group.moe_experts = *seam::models::ParseMoeExperts(moe_experts);  // one of the checked choices
  group.mamba_scan =
      mamba_scan == "sequential" ? seam::kernels::ScanAlgorithm::kSequential : seam::kernels::ScanAlgorithm::kAuto;
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

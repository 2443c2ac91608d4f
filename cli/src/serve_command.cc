// `seam serve`: LocalPipeline started with SIGINT/SIGTERM blocked, then a loop
// that waits for one of them while watching that every child still runs.
#include "serve_command.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "command_status.h"
#include "local_pipeline.h"
#include "seam/core/temp_dir.h"
#include "seam/security/listen_port.h"

namespace seam::cli {
namespace {

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!(f << port << "\n")) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write port file ", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write port file ", path));
  }
  return absl::OkStatus();
}

// The pending or next signal of `set` within `ms`; 0 when none came.
int WaitSignal(const sigset_t& set, long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// The last component of a model folder's path ("/data/Qwen3-0.6B/" -> "Qwen3-0.6B").
std::string ModelName(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? "model" : name;
}

// How to reach what serves: the client API, the HTTP API, the metrics.
void PrintHowToReach(const LocalPipeline& pipeline, const ServeCommandOptions& o, const std::string& model_name,
                     const std::string& work, std::ostream& out) {
  const std::string addr = pipeline.coordinator_address();
  const security::ClientSecurityOptions& client = pipeline.client_security();
  std::string client_flags;
  if (client.tls()) {
    client_flags = absl::StrCat(" --tls-ca ", client.tls_ca_file, " --auth-token-file ", client.auth_token_file);
  }
  out << "serving on " << addr << ": " << o.pp << " seam-stage x TP " << o.tp << " (attention DP " << o.attn_dp
      << ") behind seam-coordinator; logs in " << work << "\n";
  if (client.tls()) {
    out << "TLS: CA certificate " << client.tls_ca_file << ", bearer token in " << client.auth_token_file
        << " (both 0600, removed when serve stops)\n";
  } else {
    out << "no TLS, no token (--insecure)\n";
  }
  out << "try: seam generate --addr " << addr << client_flags << " --prompt \"3 14 15\"; stop with Ctrl-C or SIGTERM"
      << std::endl;
  if (const std::string http = pipeline.http_address(); !http.empty()) {
    const std::string url = absl::StrCat(client.tls() ? "https://" : "http://", http, "/v1");
    out << "OpenAI-compatible HTTP: " << url << " model \"" << model_name << "\"" << std::endl;
    out << "try: curl" << (client.tls() ? absl::StrCat(" --cacert ", client.tls_ca_file) : "")
        << (client.tls() ? absl::StrCat(" -H \"Authorization: Bearer $(cat ", client.auth_token_file, ")\"") : "")
        << " " << url << "/models" << std::endl;
  }
  if (const std::string metrics = pipeline.coordinator_metrics_address(); !metrics.empty()) {
    const char* scheme = client.tls() ? "https://" : "http://";
    out << "metrics: coordinator " << scheme << metrics << "/metrics";
    for (int k = 0; k < o.pp; ++k) {
      out << ", stage " << k << " " << scheme << pipeline.stage_metrics_address(k) << "/metrics";
    }
    out << (client.tls() ? absl::StrCat(" (HTTPS: CA certificate ", client.tls_ca_file, ", no token)") : "")
        << std::endl;
  }
}

// Waits for SIGINT / SIGTERM while every child runs: the signal, or 0 (and
// `exited` naming it) when a child stopped first.
int WaitWhileServing(const sigset_t& signals, LocalPipeline& pipeline, std::string* exited) {
  int sig = 0;
  while ((sig = WaitSignal(signals, 200)) == 0) {
    *exited = pipeline.ExitedProcess();
    if (!exited->empty()) return WaitSignal(signals, 200);  // a Ctrl-C reaches the children too; prefer the signal
  }
  return sig;
}

LocalPipelineOptions PipelineOptions(const ServeCommandOptions& o, const std::string& model_dir,
                                     const std::string& work, const std::string& model_name) {
  LocalPipelineOptions lp;
  lp.model_dir = model_dir;
  lp.work_dir = work;
  lp.pp = o.pp;
  lp.tp = o.tp;
  lp.attn_dp = o.attn_dp;
  lp.ucx_mode = o.ucx_mode;
  lp.insecure = o.insecure;
  lp.coordinator_listen = absl::StrCat("127.0.0.1:", o.port);
  lp.metrics_port = o.metrics_port;
  if (o.http_port >= 0) {  // the HTTP API names the model by its folder
    lp.http_listen = absl::StrCat("127.0.0.1:", o.http_port);
    lp.extra_coordinator_args = {"--served-model-name", model_name};
  }
  return lp;
}

// A taken port fails before any process starts (one server per port).
absl::Status CheckPorts(const ServeCommandOptions& o) {
  for (const auto& [port, flag] : {std::pair{o.port, "--port"}, std::pair{o.http_port, "--http-port"},
                                   std::pair{o.metrics_port, "--metrics-port"}}) {
    if (port <= 0) continue;
    if (absl::Status s = security::CheckCanListen(absl::StrCat("127.0.0.1:", port), flag); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunServeCommand(const ServeCommandOptions& o, std::ostream& out) {
  if (o.pp < 1 || o.tp < 1 || o.attn_dp < 1 || o.tp % o.attn_dp != 0 || o.port < 0 || o.port > 65535 ||
      o.http_port < -1 || o.http_port > 65535 || o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        "--pp and --tp must be >= 1, --attn-dp must divide --tp, --port within 0..65535, --http-port and "
        "--metrics-port within -1..65535");
  }
  if (absl::Status s = CheckPorts(o); !s.ok()) return s;
  // Blocked before any child or thread exists; children unblock them after fork.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::StatusOr<std::string> made = MakeTempDir("seam-serve-");
  if (!made.ok()) return Failed("", made.status());
  const std::string work = *made;
  absl::StatusOr<std::string> model = ModelDirOrDefault(o.model_dir, work, out);
  if (!model.ok()) return Failed("", model.status());
  const std::string model_dir = *model;
  const std::string model_name = ModelName(model_dir);
  auto pipeline = LocalPipeline::Start(PipelineOptions(o, model_dir, work, model_name));
  if (!pipeline.ok()) return Failed("", pipeline.status());
  const std::string addr = (*pipeline)->coordinator_address();
  if (!o.port_file.empty()) {
    absl::Status written = WritePortFile(o.port_file, std::stoi(addr.substr(addr.rfind(':') + 1)));
    if (!written.ok()) return absl::Status(AfterFlags(written.code()), written.message());
  }
  PrintHowToReach(**pipeline, o, model_name, work, out);
  std::string exited;
  const int sig = WaitWhileServing(signals, **pipeline, &exited);
  if (sig == 0) {
    const std::string tails = (*pipeline)->LogTails(15);
    (*pipeline)->Stop();
    return absl::UnavailableError(absl::StrCat(exited, " exited; stopping\n", tails));
  }
  out << "seam serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping" << std::endl;
  (*pipeline)->Stop();
  pipeline->reset();
  if (!o.port_file.empty()) std::remove(o.port_file.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(work, ignored);
  out << "seam serve: stopped" << std::endl;
  return absl::OkStatus();
}

}  // namespace seam::cli

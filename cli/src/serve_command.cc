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
#include "absl/strings/str_join.h"
#include "seam/security/listen_address.h"
#include "command_status.h"
#include "local_pipeline.h"
#include "log_relay.h"
#include "seam/core/status.h"
#include "serve_setup.h"
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

// How to reach what serves: the client API, the HTTP API, the metrics.
void PrintHowToReach(const LocalPipeline& pipeline, const ServeCommandOptions& o, const ServePlan& plan,
                     const std::string& work, std::ostream& out) {
  const std::string& model_name = plan.model_name;
  const std::string addr = pipeline.coordinator_address();
  const security::ClientSecurityOptions& client = pipeline.client_security();
  std::string client_flags;
  if (client.tls()) {
    client_flags = absl::StrCat(" --tls-ca ", client.tls_ca_file, " --auth-token-file ", client.auth_token_file);
  }
  out << "serving on " << addr << ": " << o.pp << " seam-stage x TP " << o.tp << " (attention DP " << o.attn_dp
      << ") on " << (plan.device == "cuda" ? absl::StrCat(plan.gpus, " visible GPU(s)") : std::string("the CPU"))
      << " in " << plan.dtype << " behind seam-coordinator; logs in "
      << (o.logs_dir.empty() ? work + " (removed at exit; --logs-dir keeps them)" : o.logs_dir) << "\n";
  if (client.tls() && !security::IsLoopbackHost(o.host)) {
    out << "listening on " << o.host << " (beyond loopback): the certificate also names "
        << absl::StrJoin(plan.pipeline.server_names, ", ") << "\n";
  }
  if (client.tls()) {
    out << "TLS: CA certificate " << client.tls_ca_file << ", bearer token in " << client.auth_token_file
        << " (both 0600, removed when serve stops)\n";
  } else {
    out << "no TLS, no token (--insecure)\n";
  }
  if (o.metrics_on_api && !pipeline.http_address().empty()) {
    out << "metrics on the HTTP API: " << (client.tls() ? "https://" : "http://") << pipeline.http_address()
        << "/metrics" << (client.tls() ? " (with its token)" : "") << std::endl;
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
  out << "try: seam generate --addr " << addr << client_flags << " --prompt \"3 14 15\"; stop with Ctrl-C or SIGTERM"
      << std::endl;
  if (const std::string http = pipeline.http_address(); !http.empty()) {
    const std::string url = absl::StrCat(client.tls() ? "https://" : "http://", http, "/v1");
    out << "OpenAI-compatible HTTP: " << url << " model \"" << model_name << "\"" << std::endl;
    out << "try: curl" << (client.tls() ? absl::StrCat(" --cacert ", client.tls_ca_file) : "")
        << (client.tls() ? absl::StrCat(" -H \"Authorization: Bearer $(cat ", client.auth_token_file, ")\"") : "")
        << " " << url << "/models" << std::endl;
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

// A taken port fails before any process starts (one server per port).
absl::Status CheckPorts(const ServeCommandOptions& o) {
  for (const auto& [port, flag] : {std::pair{o.port, "--port"}, std::pair{o.http_port, "--http-port"}}) {
    if (port <= 0) continue;
    if (absl::Status s = security::CheckCanListen(absl::StrCat(o.host, ":", port), flag); !s.ok()) return s;
  }
  if (o.metrics_port > 0) {
    return security::CheckCanListen(absl::StrCat("127.0.0.1:", o.metrics_port), "--metrics-port");
  }
  return absl::OkStatus();
}

// A failure after the checks: its cause on the first line, then where the logs are.
absl::Status WithLogs(const absl::Status& s, const LocalPipelineOptions& lp) {
  std::string where;
  for (const auto& [tag, path] : LocalPipelineLogs(lp)) absl::StrAppend(&where, where.empty() ? "" : ", ", path);
  return absl::Status(AfterFlags(s.code()), absl::StrCat(s.message(), "\nlogs: ", where));
}

// The flags, the model and the ports, before anything starts; then the plan.
absl::StatusOr<ServePlan> Prepare(const ServeCommandOptions& o, std::string* work, std::ostream& out) {
  SEAM_RETURN_IF_ERROR(CheckServeFlags(o));
  if (!o.model_dir.empty()) SEAM_RETURN_IF_ERROR(CheckModelDir(o.model_dir));
  SEAM_RETURN_IF_ERROR(CheckPorts(o));
  if (!o.logs_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.logs_dir, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--logs-dir ", o.logs_dir, ": ", ec.message()));
  }
  absl::StatusOr<std::string> made = MakeTempDir("seam-serve-");
  if (!made.ok()) return Failed("", made.status());
  *work = *made;
  absl::StatusOr<std::string> model = ModelDirOrDefault(o.model_dir, *work, out);
  if (!model.ok()) return Failed("", model.status());
  return PlanServe(o, *model, *work);
}

}  // namespace

absl::Status RunServeCommand(const ServeCommandOptions& o, std::ostream& out, std::ostream& err) {
  std::string work;
  absl::StatusOr<ServePlan> plan = Prepare(o, &work, out);
  if (!plan.ok()) {
    std::error_code ignored;
    if (!work.empty()) std::filesystem::remove_all(work, ignored);
    return plan.status();
  }
  // Blocked before any child or thread exists; children unblock them after fork.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  LogRelay relay(LocalPipelineLogs(plan->pipeline), err);
  auto pipeline = LocalPipeline::Start(plan->pipeline);
  if (!pipeline.ok()) {
    relay.Stop();
    return WithLogs(pipeline.status(), plan->pipeline);
  }
  const std::string addr = (*pipeline)->coordinator_address();
  if (!o.port_file.empty()) {
    absl::Status written = WritePortFile(o.port_file, std::stoi(addr.substr(addr.rfind(':') + 1)));
    if (!written.ok()) return absl::Status(AfterFlags(written.code()), written.message());
  }
  PrintHowToReach(**pipeline, o, *plan, work, out);
  std::string exited;
  const int sig = WaitWhileServing(signals, **pipeline, &exited);
  if (sig == 0) {
    (*pipeline)->Stop();
    relay.Stop();
    return WithLogs(absl::UnavailableError(absl::StrCat(exited, " exited; stopping")), plan->pipeline);
  }
  out << "seam serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping" << std::endl;
  (*pipeline)->Stop();
  pipeline->reset();
  relay.Stop();
  if (!o.port_file.empty()) std::remove(o.port_file.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(work, ignored);
  out << "seam serve: stopped" << std::endl;
  return absl::OkStatus();
}

}  // namespace seam::cli

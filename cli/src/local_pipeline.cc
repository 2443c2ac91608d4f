// LocalPipeline: spawning and stopping the processes of a loopback pipeline.
#include "local_pipeline.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "seam/core/device_memory.h"
#include "seam/core/step_limits.h"
#include "seam/core/status.h"
#include "seam/core/temp_dir.h"
#include "seam/kernels/cpu_threads.h"
#include "seam/security/listen_address.h"
#include "seam/security/local_credentials.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::cli {

// Stage k's first GPU: stages get disjoint GPUs [k·tp, (k+1)·tp) when the host
// has pp·tp of them, and share GPUs 0..tp-1 otherwise (ignored on the CPU).
int FirstGpuOfStage(int k, int tp, int pp) { return CudaDeviceCount() >= pp * tp ? k * tp : 0; }

namespace {

// Stages that share their GPUs (fewer GPUs than pp x tp: every stage starts
// at GPU 0) split the memory their KV caches may fill: the default fraction
// over pp each, unless the caller sizes the caches itself.
std::string SharedGpuKvFraction(const LocalPipelineOptions& o) {
  if (o.device == "cpu" || o.pp < 2 || CudaDeviceCount() >= o.pp * o.tp) return "";
  for (const std::string& a : o.extra_stage_args) {
    if (absl::StartsWith(a, "--kv-memory-fraction") || absl::StartsWith(a, "--kv-cache-bytes")) return "";
  }
  return absl::StrFormat("%.3f", kDefaultKvMemoryFraction / o.pp);
}

// A port on 127.0.0.1 free now (bound to port 0, then released), for
// listeners that report no port of their own (--metrics-listen).
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "cannot find a free port on 127.0.0.1");
  }
  close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

// The line of a child's log that says why it stopped: the last that names
// an error (its own "seam-stage: ..." or an error-level line), else its last.
std::string OwnErrorLine(const std::string& log) {
  std::ifstream f(log);
  std::string last, error;
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    last = line;
    if (absl::StartsWith(line, "seam-") || absl::StrContains(line, "[error]") ||
        absl::StrContains(line, "\"level\":\"error\"") || absl::StrContains(line, "[critical]")) {
      error = line;
    }
  }
  return error.empty() ? last : error;
}

// A child that stopped before it served: its own error first, then how it stopped.
absl::Status StartFailure(const absl::Status& waited, const std::string& log) {
  if (!absl::IsFailedPrecondition(waited)) return waited;
  const std::string own = OwnErrorLine(log);
  if (own.empty()) return waited;
  return absl::FailedPreconditionError(absl::StrCat(own, " (", waited.message(), ")"));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> LocalPipelineLogs(const LocalPipelineOptions& o) {
  const std::string dir = o.logs_dir.empty() ? o.work_dir : o.logs_dir;
  std::vector<std::pair<std::string, std::string>> logs;
  for (int k = 0; k < o.pp; ++k) logs.emplace_back(absl::StrCat("stage", k), absl::StrCat(dir, "/stage", k, ".log"));
  logs.emplace_back("coordinator", dir + "/coordinator.log");
  return logs;
}

absl::Status LocalPipeline::SetUpSecurity(const LocalPipelineOptions& o, std::vector<std::string>* stage_flags) {
  if (!o.insecure) {
    const std::string tls_dir = work_dir_ + "/tls";
    if (mkdir(tls_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot make ", tls_dir));
    }
    absl::StatusOr<security::LocalCredentialFiles> files = security::WriteLocalCredentials(tls_dir, absl::Hours(24), o.server_names);
    if (!files.ok()) {
      return absl::Status(files.status().code(),
                          absl::StrCat("TLS setup of the local pipeline: ", files.status().message(),
                                       " (--insecure runs it without TLS)"));
    }
    *stage_flags = {"--tls-cert", files->server_cert, "--tls-key", files->server_key,
                    "--tls-client-ca", files->ca_cert};
    coordinator_security_args_ = {"--tls-cert",        files->server_cert, "--tls-key",        files->server_key,
                                  "--auth-token-file", files->token,       "--tls-ca",         files->ca_cert,
                                  "--tls-client-cert", files->client_cert, "--tls-client-key", files->client_key};
    if (!o.auth_token.empty()) {
      std::ofstream token(files->token, std::ios::trunc);  // the file is 0600 already
      if (!(token << o.auth_token << "\n")) return absl::ErrnoToStatus(errno, "cannot write " + files->token);
    }
    client_security_ = files->Client();
    stage_client_security_ = files->CoordinatorToStages();
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      security::MakeChannelCredentials(client_security_, "127.0.0.1:0");
  if (!credentials.ok()) return credentials.status();
  client_credentials_ = *credentials;
  return absl::OkStatus();
}

absl::Status LocalPipeline::StartStages(const LocalPipelineOptions& o, const std::string& bin,
                                        const std::vector<std::string>& security_flags) {
  std::vector<std::string> port_files;
  LocalPipelineOptions named = o;
  named.work_dir = work_dir_;
  const auto logs = LocalPipelineLogs(named);
  for (int k = 0; k < o.pp; ++k) {
    const std::string port_file = absl::StrCat(work_dir_, "/stage", k, ".port");
    const std::string log = logs[k].second;
    logs_.push_back(log);
    std::vector<std::string> stage = {bin + "/seam-stage", "--listen",  "127.0.0.1:0",
                                      "--port-file",       port_file,   "--ucx-mode",
                                      o.ucx_mode,          "--device",  o.device,
                                      "--first-gpu",       absl::StrCat(FirstGpuOfStage(k, o.tp, o.pp))};
    stage.insert(stage.end(), security_flags.begin(), security_flags.end());
    if (o.metrics_port >= 0) {
      absl::StatusOr<int> metrics_port = FreeLoopbackPort();
      if (!metrics_port.ok()) return metrics_port.status();
      stage_metrics_ports_.push_back(*metrics_port);
      stage.insert(stage.end(), {"--metrics-listen", absl::StrCat("127.0.0.1:", *metrics_port)});
    }
    if (const std::string share = SharedGpuKvFraction(o); !share.empty()) {
      stage.insert(stage.end(), {"--kv-memory-fraction", share});
    }
    stage.insert(stage.end(), o.extra_stage_args.begin(), o.extra_stage_args.end());
    auto child = ChildProcess::Spawn(stage, log);
    if (!child.ok()) return child.status();
    stages_.push_back(std::move(*child));
    port_files.push_back(port_file);
  }
  for (int k = 0; k < o.pp; ++k) {
    auto port = stages_[k]->WaitForPortFile(port_files[k], o.startup_timeout);
    if (!port.ok()) return StartFailure(port.status(), logs_[k]);
    stage_addresses_.push_back(absl::StrCat("127.0.0.1:", *port));
  }
  return absl::OkStatus();
}

absl::Status LocalPipeline::StartCoordinator(const LocalPipelineOptions& o, const std::string& bin) {
  const std::string port_file = work_dir_ + "/coordinator.port";
  LocalPipelineOptions named = o;
  named.work_dir = work_dir_;
  const std::string log = LocalPipelineLogs(named).back().second;
  logs_.push_back(log);
  std::vector<std::string> argv = {bin + "/seam-coordinator", "--listen", o.coordinator_listen, "--port-file",
                                   port_file, "--stages", absl::StrJoin(stage_addresses_, ","), "--model",
                                   o.model_dir, "--tp", std::to_string(o.tp), "--attn-dp", std::to_string(o.attn_dp),
                                   "--stage-timeout", o.stage_timeout};
  argv.insert(argv.end(), coordinator_security_args_.begin(), coordinator_security_args_.end());
  const std::string http_port_file = work_dir_ + "/coordinator.http.port";
  if (!o.http_listen.empty()) {
    argv.insert(argv.end(), {"--http-listen", o.http_listen, "--http-port-file", http_port_file});
  }
  if (o.metrics_port >= 0) {
    coordinator_metrics_port_ = o.metrics_port;
    if (coordinator_metrics_port_ == 0) {
      absl::StatusOr<int> metrics_port = FreeLoopbackPort();
      if (!metrics_port.ok()) return metrics_port.status();
      coordinator_metrics_port_ = *metrics_port;
    }
    argv.insert(argv.end(), {"--metrics-listen", absl::StrCat("127.0.0.1:", coordinator_metrics_port_)});
  }
  argv.insert(argv.end(), o.extra_coordinator_args.begin(), o.extra_coordinator_args.end());
  auto child = ChildProcess::Spawn(argv, log);
  if (!child.ok()) return child.status();
  coordinator_ = std::move(*child);
  auto port = coordinator_->WaitForPortFile(port_file, o.startup_timeout);
  if (!port.ok()) return StartFailure(port.status(), log);
  coordinator_port_ = *port;
  if (!o.http_listen.empty()) {  // written before the gRPC port file
    auto http_port = coordinator_->WaitForPortFile(http_port_file, std::chrono::seconds(5));
    if (!http_port.ok()) return http_port.status();
    http_port_ = *http_port;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LocalPipeline>> LocalPipeline::Start(const LocalPipelineOptions& o) {
  std::unique_ptr<LocalPipeline> p(new LocalPipeline());
  p->work_dir_ = o.work_dir;
  if (p->work_dir_.empty()) {
    absl::StatusOr<std::string> made = MakeTempDir("seam-run-");
    if (!made.ok()) return made.status();
    p->work_dir_ = *made;
  }
  const std::string bin = o.bin_dir.empty() ? ExecutableDir() : o.bin_dir;
  if (const std::string host(security::HostOfAddress(o.coordinator_listen));
      !host.empty() && host != "0.0.0.0" && host != "::" && host != "[::]") {
    p->api_host_ = host;
  }
  // Every stage process runs tp CPU ranks on this host: split the cores among
  // all of them (children inherit the environment; an operator's choice stands).
  static const bool operator_chose = std::getenv("OPENBLAS_NUM_THREADS") != nullptr;
  if (!operator_chose) {
    const std::string blas_threads = std::to_string(kernels::CpuMathThreadsPerRank(o.pp * o.tp));
    setenv("OPENBLAS_NUM_THREADS", blas_threads.c_str(), 1);
  }
  std::vector<std::string> stage_security;
  SEAM_RETURN_IF_ERROR(p->SetUpSecurity(o, &stage_security));
  // A process that does not come up: its error with every log's last lines.
  const auto annotate = [&](const absl::Status& s) {
    if (!o.log_tails_in_errors) return s;
    return absl::Status(s.code(), absl::StrCat(s.message(), "\n", p->LogTails(15)));
  };
  if (absl::Status s = p->StartStages(o, bin, stage_security); !s.ok()) return annotate(s);
  if (absl::Status s = p->StartCoordinator(o, bin); !s.ok()) return annotate(s);
  return p;
}

LocalPipeline::~LocalPipeline() { Stop(); }

std::string LocalPipeline::coordinator_address() const { return absl::StrCat(api_host_, ":", coordinator_port_); }

std::string LocalPipeline::http_address() const {
  return http_port_ == 0 ? "" : absl::StrCat(api_host_, ":", http_port_);
}

std::string LocalPipeline::coordinator_metrics_address() const {
  return coordinator_metrics_port_ == 0 ? "" : absl::StrCat("127.0.0.1:", coordinator_metrics_port_);
}

std::string LocalPipeline::stage_metrics_address(int k) const {
  return k < 0 || k >= static_cast<int>(stage_metrics_ports_.size())
             ? ""
             : absl::StrCat("127.0.0.1:", stage_metrics_ports_[k]);
}

std::shared_ptr<grpc::Channel> LocalPipeline::ClientChannel() const {
  return grpc::CreateChannel(coordinator_address(), client_credentials_);
}

std::string LocalPipeline::stage_address(int k) const { return stage_addresses_[k]; }

absl::StatusOr<std::shared_ptr<grpc::Channel>> LocalPipeline::StageChannel(int k) const {
  return security::MakeChannel(stage_client_security_, stage_addresses_[k]);
}

void LocalPipeline::Stop() {
  if (coordinator_) coordinator_->Stop(std::chrono::seconds(5));
  for (auto& s : stages_) s->Signal(SIGTERM);
  for (auto& s : stages_) s->Stop(std::chrono::seconds(3));
}

std::string LocalPipeline::ExitedProcess() {
  if (coordinator_ && !coordinator_->Running()) return absl::StrCat("seam-coordinator (pid ", coordinator_->pid(), ")");
  for (size_t k = 0; k < stages_.size(); ++k) {
    if (!stages_[k]->Running()) return absl::StrCat("seam-stage ", k, " (pid ", stages_[k]->pid(), ")");
  }
  return "";
}

std::string LocalPipeline::LogTails(int lines) const {
  std::string out;
  for (const std::string& path : logs_) {
    std::ifstream f(path);
    std::deque<std::string> tail;
    for (std::string line; std::getline(f, line);) {
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    absl::StrAppend(&out, "--- ", path, " ---\n");
    for (const std::string& line : tail) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::vector<std::string> LocalPipeline::LogLines(const std::string& text) const {
  std::vector<std::string> out;
  for (const std::string& path : logs_) {
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);) {
      if (line.find(text) != std::string::npos) out.push_back(line);
    }
  }
  return out;
}

absl::Status WriteDefaultModel(const std::string& dir) {
  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = 4;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.vocab_size = 256;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  weights::RandomCheckpointOptions rc;
  rc.seed = 1;
  return weights::WriteRandomCheckpoint(c, rc, dir);
}

absl::StatusOr<std::string> ModelDirOrDefault(const std::string& model_dir, const std::string& work,
                                              std::ostream& out) {
  if (!model_dir.empty()) return model_dir;
  const std::string dir = work + "/model";
  SEAM_RETURN_IF_ERROR(WriteDefaultModel(dir));
  out << "model: default random qwen3 checkpoint (4 layers, hidden 64, vocab 256) in " << dir << "\n";
  return dir;
}

}  // namespace seam::cli

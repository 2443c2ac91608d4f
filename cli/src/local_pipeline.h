// LocalPipeline: P seam-stage processes and one seam-coordinator on loopback,
// found next to the running executable (or in `bin_dir`), each with a port
// file and a log in a fresh temporary directory. Used by `seam run` and the
// end-to-end tests; the destructor kills whatever is still running.
// By default every process serves TLS: an ephemeral CA, certificates and a
// bearer token are made in <work_dir>/tls (mode 0600); the stages require the
// coordinator's client certificate, the coordinator requires the token.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "child_process.h"
#include "seam/security/credentials.h"

namespace seam::cli {

struct LocalPipelineOptions {
  std::string model_dir;        // required
  std::string bin_dir;          // empty: ExecutableDir()
  std::string work_dir;         // port files and logs; empty: a new MakeTempDir("seam-run-")
  int pp = 2;
  int tp = 1;
  int attn_dp = 1;
  std::string ucx_mode = "tcp";
  std::string device = "cpu";  // seam-stage --device: cpu | cuda | auto
  std::string stage_timeout = "10s";
  std::string coordinator_listen = "127.0.0.1:0";  // the client API address
  // Non-empty: the coordinator also serves the OpenAI-compatible HTTP API
  // there (--http-listen), with the same TLS and token; "127.0.0.1:0" picks a port.
  std::string http_listen;
  // >= 0: the coordinator and every stage serve Prometheus /metrics on
  // 127.0.0.1 (--metrics-listen; HTTPS with the pipeline's certificate unless
  // insecure): the coordinator on this port (0: a free one), each stage on a
  // free one. -1: no metrics.
  int metrics_port = -1;
  std::vector<std::string> extra_coordinator_args;
  std::vector<std::string> extra_stage_args;  // appended to every seam-stage command line
  std::chrono::milliseconds startup_timeout{120000};
  // Plaintext everywhere, no token (for machines where TLS setup fails).
  bool insecure = false;
  // Non-empty: the client API's bearer token (else a random one); written
  // to the token file the client security names.
  std::string auth_token;
  // More names the TLS server certificate carries (a host beyond loopback).
  std::vector<std::string> server_names;
  // Where the processes' logs go (empty: the work dir).
  std::string logs_dir;
  // A start-up failure's message: its cause (the process's own error line)
  // then the last lines of every log (true) or only where the logs are.
  bool log_tails_in_errors = true;
};

// The processes' logs a pipeline with `o` writes: {"stage0", path}, ...,
// {"coordinator", path}, in start order (work_dir must be set).
std::vector<std::pair<std::string, std::string>> LocalPipelineLogs(const LocalPipelineOptions& o);

// The first GPU of stage k of a local pipeline of pp stages × tp GPUs.
int FirstGpuOfStage(int k, int tp, int pp);

class LocalPipeline {
 public:
  // Starts the stages, waits for their ports, starts the coordinator and
  // waits for its port (written once every stage is READY). On failure,
  // everything started is killed and the error names the process and its log.
  static absl::StatusOr<std::unique_ptr<LocalPipeline>> Start(const LocalPipelineOptions& options);
  ~LocalPipeline();  // Stop()

  std::string coordinator_address() const;
  // HOST:PORT of the HTTP API ("" without LocalPipelineOptions::http_listen).
  std::string http_address() const;
  // HOST:PORT of the coordinator's and of stage k's /metrics ("" without
  // LocalPipelineOptions::metrics_port).
  std::string coordinator_metrics_address() const;
  std::string stage_metrics_address(int k) const;
  const std::string& work_dir() const { return work_dir_; }
  // How a client reaches the coordinator: its CA and the token (empty when
  // insecure), and a channel made with them.
  const security::ClientSecurityOptions& client_security() const { return client_security_; }
  std::shared_ptr<grpc::Channel> ClientChannel() const;
  // The stages' address, and the options the coordinator reaches them with.
  std::string stage_address(int k) const;
  const security::ClientSecurityOptions& stage_client_security() const { return stage_client_security_; }
  // A channel to stage k as the coordinator reaches it (mutual TLS unless insecure).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> StageChannel(int k) const;
  // The credential flags the pipeline's coordinator was started with (for a
  // second coordinator of the same stages).
  const std::vector<std::string>& coordinator_security_args() const { return coordinator_security_args_; }
  ChildProcess& stage(int k) { return *stages_[k]; }
  // The coordinator's process id (-1 once stopped): for tests that kill or stop it.
  pid_t coordinator_pid() const { return coordinator_ ? coordinator_->pid() : -1; }
  // SIGTERM, then SIGKILL after a grace period: coordinator first, then stages.
  void Stop();
  // The name and pid of a process that has exited, or "" while all run.
  std::string ExitedProcess();
  // The last lines of every log, for error reports.
  std::string LogTails(int lines) const;
  // Every line of the processes' logs that contains `text`, in log order.
  std::vector<std::string> LogLines(const std::string& text) const;

 private:
  LocalPipeline() = default;
  // Start's parts: the TLS files and each side's flags (none with
  // o.insecure), the stage processes with their ports, the coordinator.
  absl::Status SetUpSecurity(const LocalPipelineOptions& o, std::vector<std::string>* stage_flags);
  absl::Status StartStages(const LocalPipelineOptions& o, const std::string& bin,
                           const std::vector<std::string>& security_flags);
  absl::Status StartCoordinator(const LocalPipelineOptions& o, const std::string& bin);
  std::string work_dir_;
  std::vector<std::string> logs_;
  std::vector<std::unique_ptr<ChildProcess>> stages_;
  std::unique_ptr<ChildProcess> coordinator_;
  int coordinator_port_ = 0;
  int http_port_ = 0;
  std::string api_host_ = "127.0.0.1";  // where a client reaches the APIs (a wildcard listen: loopback)
  int coordinator_metrics_port_ = 0;
  std::vector<int> stage_metrics_ports_;
  std::vector<std::string> stage_addresses_;
  security::ClientSecurityOptions client_security_;
  security::ClientSecurityOptions stage_client_security_;
  std::shared_ptr<grpc::ChannelCredentials> client_credentials_;
  std::vector<std::string> coordinator_security_args_;
};

// Writes the small random qwen3 checkpoint (4 layers, hidden 64, vocab 256)
// that `seam run` and `seam serve` use without --model.
absl::Status WriteDefaultModel(const std::string& dir);
// `model_dir`, or when it is empty that checkpoint written to `work`/model
// (and said so on `out`).
absl::StatusOr<std::string> ModelDirOrDefault(const std::string& model_dir, const std::string& work,
                                              std::ostream& out);

}  // namespace seam::cli

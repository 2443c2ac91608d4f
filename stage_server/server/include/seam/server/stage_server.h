// StageServer: one stage server process's gRPC side and lifetime. It starts
// the stage actor (and with it the UCX worker), serves StageControl,
// grpc.health.v1 (NOT_SERVING until the stage is READY) and reflection on
// one port, and shuts down through the actor's gate: drain, then stop gRPC.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/metrics/metrics_endpoint.h"
#include "seam/server/stage_actor.h"

namespace grpc {
class Server;
class ServerCredentials;
class HealthCheckServiceInterface;
}  // namespace grpc

namespace seam::security {
class HealthPort;
}  // namespace seam::security

namespace seam::server {

class StageService;
class StageMetrics;

enum class UcxMode {
  kTcp,  // PEER error mode over TCP: a dead neighbour is detected
  kShm,  // shared memory between processes of one host, no peer detection
};
absl::StatusOr<UcxMode> ParseUcxMode(const std::string& text);  // "tcp" or "shm"

// UCX settings of the tcp mode, on top of the UCX_* environment: TLS=tcp, and
// NET_DEVICES=lo only for a loopback listen host when UCX_NET_DEVICES is not
// set. Any other listen host (0.0.0.0 in a pod) leaves the devices to UCX or
// UCX_NET_DEVICES, so that stages on different hosts can reach each other.
std::vector<std::pair<std::string, std::string>> TcpUcxConfig(const std::string& listen_host,
                                                              bool net_devices_from_environment);

struct StageServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  // How `listen` is secured (security::MakeServerCredentials: TLS, mutual TLS
  // with the coordinator's client certificate); null: plaintext, for
  // in-process tests on loopback.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::string health_listen;  // non-empty: a plaintext grpc.health.v1-only port for probes
  // Prometheus /metrics when metrics.listen is non-empty (HTTPS with a
  // certificate, else plain HTTP on loopback only unless insecure).
  metrics::MetricsEndpointOptions metrics;
  UcxMode ucx_mode = UcxMode::kTcp;
  absl::Duration handoff_timeout = absl::Seconds(10);   // longest wait for a neighbour per microbatch
  bool run_ahead = true;  // a fed wave's next step runs while its last answer travels (MicrobatchRunner)
  runtime::StageGroupOptions group;  // where and how the stage's ranks compute (the layer range comes with Configure)
  // The FFN output transports the stage's boundaries may use; kAuto resolves
  // per architecture when the layers load. Batch variants: group.variants.
  boundary::ReductionPolicy policy = boundary::ReductionPolicy::kAuto;
  absl::Duration drain_timeout = absl::Seconds(20);     // longest a shutdown waits for in-flight work
  // Then calls still open (Run streams, idle connections) are cancelled.
  absl::Duration grpc_grace = absl::Milliseconds(500);
};

class StageServer {
 public:
  static absl::StatusOr<std::unique_ptr<StageServer>> Start(const StageServerOptions& options);
  ~StageServer();

  int port() const { return port_; }
  int health_port() const;  // 0 without health_listen
  int metrics_port() const;  // 0 without metrics_listen
  // Thread-safe: asks Wait to shut down (the Shutdown call and SIGTERM use it).
  void RequestShutdown();
  // Blocks until shutdown is requested, then publishes NOT_SERVING, drains the
  // stage (bounded by drain_timeout) and stops gRPC (bounded by grpc_grace).
  // DEADLINE_EXCEEDED when the drain did not finish in time.
  absl::Status Wait();

 private:
  explicit StageServer(const StageServerOptions& options);
  void SetServing(bool serving);

  StageServerOptions options_;
  int port_ = 0;
  // Declared before the actor: its runner records into them until it stops.
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<StageMetrics> metrics_;
  std::unique_ptr<StageActor> actor_;
  std::unique_ptr<StageService> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  std::condition_variable shutdown_cv_;
  bool shutdown_requested_ = false;
  bool serving_ = false;
  grpc::HealthCheckServiceInterface* health_ = nullptr;
  std::unique_ptr<security::HealthPort> health_port_;  // guarded: the actor reports from its thread
};

}  // namespace seam::server

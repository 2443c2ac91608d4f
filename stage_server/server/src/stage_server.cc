// Process-level wiring of a stage server: actor, gRPC server, health, shutdown.
#include "seam/server/stage_server.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "seam/core/logging.h"
#include "seam/security/health_port.h"
#include "seam/security/listen_port.h"
#include "request_checks.h"
#include "seam/metrics/metrics_endpoint.h"
#include "stage_metrics.h"
#include "stage_service.h"

namespace seam::server {
namespace {

constexpr char kServiceName[] = "seam.v1.StageControl";

}  // namespace

std::vector<std::pair<std::string, std::string>> TcpUcxConfig(const std::string& listen_host,
                                                              bool net_devices_from_environment) {
  std::vector<std::pair<std::string, std::string>> config = {{"TLS", "tcp"}};
  const bool loopback = listen_host == "localhost" || listen_host == "[::1]" || listen_host == "::1" ||
                        listen_host.rfind("127.", 0) == 0;
  if (loopback && !net_devices_from_environment) config.emplace_back("NET_DEVICES", "lo");
  return config;
}

absl::StatusOr<UcxMode> ParseUcxMode(const std::string& text) {
  if (text == "tcp") return UcxMode::kTcp;
  if (text == "shm") return UcxMode::kShm;
  return absl::InvalidArgumentError(absl::StrCat("ucx mode '", text, "': expected tcp or shm"));
}

StageServer::StageServer(const StageServerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<StageServer>> StageServer::Start(const StageServerOptions& options) {
  std::unique_ptr<StageServer> self(new StageServer(options));
  StageActorOptions actor;
  if (options.ucx_mode == UcxMode::kTcp) {
    actor.ucx.error_mode = handoff::UcxErrorMode::kPeer;
    actor.ucx.config = TcpUcxConfig(options.listen.substr(0, options.listen.rfind(':')),
                                    std::getenv("UCX_NET_DEVICES") != nullptr);
  } else {
    actor.ucx.error_mode = handoff::UcxErrorMode::kNone;
  }
  actor.handoff_timeout = options.handoff_timeout;
  actor.run_ahead = options.run_ahead;
  actor.group = options.group;
  actor.policy = options.policy;
  actor.host = options.listen.substr(0, options.listen.rfind(':'));
  actor.on_serving = [s = self.get()](bool serving) { s->SetServing(serving); };
  if (!options.metrics.listen.empty()) {
    auto endpoint = metrics::MetricsEndpoint::Start(options.metrics);
    if (!endpoint.ok()) return endpoint.status();
    self->metrics_endpoint_ = std::move(*endpoint);
    self->metrics_ = std::make_unique<StageMetrics>(*self->metrics_endpoint_);
    actor.metrics = self->metrics_.get();
  }
  absl::StatusOr<std::unique_ptr<StageActor>> started = StageActor::Start(std::move(actor));
  if (!started.ok()) return started.status();
  self->actor_ = std::move(*started);
  if (self->metrics_ != nullptr) self->metrics_->SetStatusSource([a = self->actor_.get()] { return a->Status(); });
  self->service_ = std::make_unique<StageService>(self->actor_.get(), [s = self.get()] { s->RequestShutdown(); });

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  security::ListenExclusively(builder);
  builder.AddListeningPort(options.listen,
                           options.credentials != nullptr ? options.credentials : grpc::InsecureServerCredentials(),
                           &self->port_);
  builder.RegisterService(self->service_.get());
  // The largest legal descriptor fits; anything larger is refused by gRPC
  // (RESOURCE_EXHAUSTED) before it is parsed. The coordinator never sends one.
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<uint64_t>(MaxDescriptorBytes(options.group.kv.max_step_tokens), std::numeric_limits<int>::max())));
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr || self->port_ == 0) return security::ListenFailure(options.listen, "--listen");
  std::unique_ptr<security::HealthPort> health_port;
  if (!options.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<security::HealthPort>> started = security::HealthPort::Start(options.health_listen);
    if (!started.ok()) return started.status();
    health_port = std::move(*started);
  }
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->health_ = self->server_->GetHealthCheckService();
    self->health_port_ = std::move(health_port);
    if (self->health_port_ != nullptr) self->health_port_->SetServing(kServiceName, self->serving_);
    self->health_->SetServingStatus(self->serving_);
    self->health_->SetServingStatus(kServiceName, self->serving_);
  }
  SEAM_LOG_INFO("stage server listening on port {}", self->port_);
  return self;
}

StageServer::~StageServer() {
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + options_.grpc_grace));
  if (metrics_ != nullptr) metrics_->SetStatusSource(nullptr);  // scrapes stop reading the actor
  actor_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  health_ = nullptr;
  health_port_.reset();
}

int StageServer::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port() : 0;
}

int StageServer::health_port() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_port_ != nullptr ? health_port_->port() : 0;
}

void StageServer::SetServing(bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  serving_ = serving;
  if (health_ != nullptr) {
    health_->SetServingStatus(serving);
    health_->SetServingStatus(kServiceName, serving);
  }
  if (health_port_ != nullptr) health_port_->SetServing(kServiceName, serving);
}

void StageServer::RequestShutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_requested_ = true;
  }
  shutdown_cv_.notify_all();
}

absl::Status StageServer::Wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    shutdown_cv_.wait(lock, [this] { return shutdown_requested_; });
  }
  SEAM_LOG_INFO("shutting down: draining the stage");
  SetServing(false);
  actor_->Drain(/*abandon=*/false, [](v1::StageStatus) {});
  absl::Status status = absl::OkStatus();
  if (!actor_->WaitStopped(absl::Now() + options_.drain_timeout)) {
    status = absl::DeadlineExceededError(
        absl::StrCat("the stage did not drain within ", absl::FormatDuration(options_.drain_timeout)));
  }
  SEAM_LOG_INFO("stage drained; stopping gRPC");
  server_->Shutdown(absl::ToChronoTime(absl::Now() + options_.grpc_grace));
  server_->Wait();
  SEAM_LOG_INFO("stage server stopped");
  return status;
}

}  // namespace seam::server

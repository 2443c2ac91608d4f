// seam-coordinator's life: stages up, driver and service up, wait for a
// signal, everything down.
#include "service/coordinator_server.h"

#include <csignal>
#include <fstream>
#include <memory>
#include <mutex>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "http/openai_server.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/security/listen_port.h"
#include "seam/security/bearer_token.h"
#include "seam/security/health_port.h"
#include "seam/security/listen_address.h"
#include "seam/weights/model_config.h"
#include "service/coordinator_service.h"
#include "service/grpc_stage_link.h"
#include "service/pipeline_limits.h"
#include "service/request_validation.h"
#include "service/request_metrics.h"
#include "service/stage_setup.h"

namespace seam::coordinator {
namespace {

bool WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
    if (!f.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

v1::Metadata MakeMetadata(const weights::ModelConfig& config, const CoordinatorServerOptions& o,
                          const std::vector<std::pair<int, int>>& layers, v1::DType dtype) {
  v1::Metadata m;
  v1::ModelFacts* f = m.mutable_model();
  f->set_architecture(config.is_nemotron_h() ? "NemotronHForCausalLM"
                      : config.is_moe()      ? "Qwen3MoeForCausalLM"
                                             : "Qwen3ForCausalLM");
  f->set_num_layers(config.num_hidden_layers);
  f->set_hidden_size(config.hidden_size);
  f->set_vocab_size(config.vocab_size);
  f->set_max_position_embeddings(config.max_position_embeddings);
  f->set_dtype(dtype);
  v1::Topology* t = m.mutable_topology();
  t->set_pipeline_size(o.stages.size());
  t->set_tp_size(o.tp);
  t->set_attn_dp_size(o.attn_dp);
  for (size_t k = 0; k < o.stages.size(); ++k) {
    v1::StageInfo* s = t->add_stages();
    s->set_pipeline_rank(k);
    s->set_first_layer(layers[k].first);
    s->set_last_layer(layers[k].second);
    s->set_host(o.stages[k]);
  }
  return m;
}

// The dtype the stages compute in, as they report it (stage 0's; a stage of
// another dtype is logged). F32 for stages too old to report one.
v1::DType StagesDtype(const std::vector<StageEndpoint>& stages) {
  const v1::DType first = stages.front().status.dtype();
  for (size_t k = 1; k < stages.size(); ++k) {
    if (stages[k].status.dtype() != first) {
      SEAM_LOG_WARN("stage {} at {} computes in {}, stage 0 in {}", k, stages[k].address,
                    v1::DType_Name(stages[k].status.dtype()), v1::DType_Name(first));
    }
  }
  return first == v1::DTYPE_UNSPECIFIED ? v1::DTYPE_F32 : first;
}

// The health status ("" and every service) from the pipeline's state: set
// from the driver thread, applied once the server runs, NOT_SERVING for good
// after Stop().
class HealthGate {
 public:
  void Set(bool up) {
    std::lock_guard<std::mutex> lock(mu_);
    up_ = up;
    Apply();
  }
  void Attach(grpc::HealthCheckServiceInterface* service, security::HealthPort* port) {
    std::lock_guard<std::mutex> lock(mu_);
    service_ = service;
    port_ = port;
    Apply();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    Apply();
  }

 private:
  void Apply() {
    if (service_ != nullptr) service_->SetServingStatus(up_ && !stopped_);
    if (port_ != nullptr) port_->SetServing("", up_ && !stopped_);
  }
  std::mutex mu_;
  grpc::HealthCheckServiceInterface* service_ = nullptr;
  security::HealthPort* port_ = nullptr;
  bool up_ = true;
  bool stopped_ = false;
};

// Every port the coordinator listens on can be bound now.
absl::Status CheckPorts(const CoordinatorServerOptions& o) {
  for (const auto& [address, flag] : {std::pair{o.listen, "--listen"}, std::pair{o.http_listen, "--http-listen"},
                                      std::pair{o.metrics_listen, "--metrics-listen"},
                                      std::pair{o.health_listen, "--health-listen"}}) {
    if (address.empty()) continue;
    if (absl::Status s = security::CheckCanListen(address, flag); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

bool ParseDuration(const std::string& text, std::chrono::milliseconds* out) {
  double value = 0;
  std::string number = text;
  double scale = 1000;
  if (absl::EndsWith(text, "ms")) {
    number = text.substr(0, text.size() - 2), scale = 1;
  } else if (absl::EndsWith(text, "s")) {
    number = text.substr(0, text.size() - 1);
  } else if (absl::EndsWith(text, "m")) {
    number = text.substr(0, text.size() - 1), scale = 60000;
  }
  if (!absl::SimpleAtod(number, &value) || value <= 0) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(value * scale));
  return true;
}

// The model's name over HTTP: --served-model-name, else the --model folder's name.
std::string ServedModelName(const CoordinatorServerOptions& o) {
  if (!o.served_model_name.empty()) return o.served_model_name;
  std::string dir = o.model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir.substr(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/') + 1);
}

namespace {

// The exit code a failed phase of the process ends with (coordinator_server.h):
// 2 for what the operator must fix in the arguments, 1 otherwise.
constexpr char kExitCodePayload[] = "type.seam.dev/exit_code";

absl::Status OperatorError(absl::Status s) {
  s.SetPayload(kExitCodePayload, absl::Cord("2"));
  return s;
}

int ExitCodeOf(const absl::Status& s) { return s.GetPayload(kExitCodePayload).has_value() ? 2 : 1; }

// `s`, marked as the operator's to fix when `operator_error`.
absl::Status Failure(const absl::Status& s, bool operator_error) { return operator_error ? OperatorError(s) : s; }

// seam-coordinator's parts, brought up in order and torn down in reverse.
class CoordinatorProcess {
 public:
  explicit CoordinatorProcess(const CoordinatorServerOptions& o) : o_(o) {}
  ~CoordinatorProcess() { Stop(); }
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // The model, the layer split, text, listeners' and stages' credentials:
  // every error is the arguments' (exit 2).
  absl::Status CheckArguments();
  // Stages connected, configured and READY; their limits; the driver.
  absl::Status BringUpPipeline();
  // Metrics, the gRPC server, the health port, the HTTP API, the port file.
  absl::Status StartServing();
  // Health NOT_SERVING, the driver down (every live call answered), then the
  // listeners; once.
  void Stop();

  int port() const { return port_; }

 private:
  PipelineDriverOptions DriverOptions(uint64_t epoch) const;
  absl::Status StartMetrics();
  absl::Status StartGrpc();
  absl::Status StartHttp();

  const CoordinatorServerOptions& o_;
  weights::ModelConfig config_;
  std::vector<std::pair<int, int>> layers_;
  std::unique_ptr<ModelText> text_;
  http::OpenAiServerOptions http_options_;
  std::shared_ptr<grpc::ServerCredentials> server_credentials_;
  std::shared_ptr<grpc::ChannelCredentials> stage_credentials_;
  std::vector<StageEndpoint> stages_;
  PipelineLayout layout_;
  PipelineLimits limits_;
  RequestLimits request_limits_;
  std::shared_ptr<HealthGate> health_ = std::make_shared<HealthGate>();
  std::unique_ptr<PipelineDriver> driver_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<security::HealthPort> health_port_;
  std::unique_ptr<http::OpenAiServer> http_server_;
  int port_ = 0;
  bool stopped_ = false;
};

absl::Status CoordinatorProcess::CheckArguments() {
  absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(o_.model_dir);
  if (!config.ok()) return OperatorError(config.status());
  config_ = *config;
  if (absl::Status s = weights::ValidateParallel(config_, o_.tp, o_.attn_dp); !s.ok()) return OperatorError(s);
  auto layers = SplitLayers(config_.num_hidden_layers, o_.stages.size(), o_.layers);
  if (!layers.ok()) return OperatorError(layers.status());
  layers_ = *layers;
  // Text prompts and completions: the checkpoint's tokenizer, if it has one.
  absl::StatusOr<std::unique_ptr<ModelText>> text = ModelText::Load(o_.model_dir);
  if (!text.ok()) return OperatorError(text.status());
  text_ = std::move(*text);
  if (text_ == nullptr) SEAM_LOG_INFO("{} has no tokenizer.json: prompts are token ids only", o_.model_dir);
  http_options_.listen = o_.http_listen;
  http_options_.security = o_.server_security;
  http_options_.model_name = ServedModelName(o_);
  if (!o_.http_listen.empty()) {
    if (absl::Status s = http::OpenAiServer::CheckOptions(http_options_); !s.ok()) return OperatorError(s);
  }
  security::ServerSecurityOptions server_security = o_.server_security;
  server_security.open_path_prefixes = {security::kHealthPathPrefix};  // probes; reflection needs the token
  auto server_credentials = security::MakeServerCredentials(server_security, o_.listen);
  if (!server_credentials.ok()) return OperatorError(server_credentials.status());
  server_credentials_ = *server_credentials;
  for (const std::string& stage : o_.stages) {
    if (!o_.stage_security.tls() && !security::IsLoopbackAddress(stage) && !o_.server_security.insecure) {
      return OperatorError(absl::FailedPreconditionError(absl::StrCat(
          "refusing to reach stage ", stage,
          " without TLS: pass --tls-ca (and --tls-client-cert/--tls-client-key for mutual TLS), or --insecure")));
    }
  }
  auto stage_credentials = security::MakeChannelCredentials(o_.stage_security, o_.stages.front());
  if (!stage_credentials.ok()) return OperatorError(stage_credentials.status());
  stage_credentials_ = *stage_credentials;
  // Ports first: a second coordinator on a taken port must not adopt the stages of the one that holds it.
  return CheckPorts(o_);
}

PipelineDriverOptions CoordinatorProcess::DriverOptions(uint64_t epoch) const {
  PipelineDriverOptions d;
  d.scheduler.pipeline_stages = o_.stages.size();
  d.scheduler.dp_groups = o_.attn_dp;
  d.scheduler.max_queue = o_.max_queue;
  d.scheduler.max_decode_steps = o_.decode_steps;
  d.scheduler.max_inflight_microbatches = o_.max_inflight_microbatches;
  // auto: one stage that feeds the token it chose (an older stage would refuse fed entries).
  bool stages_feed = true;
  for (const StageEndpoint& e : stages_) stages_feed = stages_feed && e.status.feeds_previous_token();
  d.scheduler.overlap_steps =
      o_.overlap_steps == "on" || (o_.overlap_steps == "auto" && o_.stages.size() == 1 && stages_feed);
  d.delivery_threads = o_.delivery_threads;
  d.scheduler.first_decode_steps = o_.decode_ramp_start > 0 ? o_.decode_ramp_start : o_.decode_steps;
  d.scheduler.first_epoch = epoch;
  const auto narrow = [](int64_t v) { return static_cast<int>(std::min<int64_t>(v, std::numeric_limits<int>::max())); };
  d.scheduler.max_tokens_per_microbatch = narrow(limits_.max_step_tokens);
  if (o_.decode_run_past) d.scheduler.max_context = narrow(ServingLimitsOf(request_limits_).max_model_len);
  d.scheduler.kv_blocks_per_dp_group = narrow(limits_.kv_blocks_per_dp_group);
  d.scheduler.block_size = narrow(limits_.kv_block_size);
  d.scheduler.max_sequences_per_dp_group = narrow(limits_.max_sequences_per_dp_group);
  d.scheduler.chunked_prefill = o_.caps.chunked_prefill;
  d.scheduler.prefill_chunk_tokens = o_.prefill_chunk_tokens;
  d.scheduler.max_mixed_prefill_tokens = o_.max_mixed_prefill_tokens;
  d.scheduler.itl_target_ms = o_.itl_target_ms;
  d.scheduler.prefix_caching = o_.prefix_caching && limits_.max_sequences_per_dp_group == 0;
  d.stage_timeout = o_.stage_timeout;
  d.stage_timeout_per_token = o_.stage_timeout_per_token;
  // The stages own their descriptor limit (their gRPC receive limit); the
  // driver never sends a descriptor over the least of them.
  for (const StageEndpoint& e : stages_) {
    const uint64_t l = e.status.max_descriptor_bytes();
    if (l > 0 && (d.max_descriptor_bytes == 0 || l < d.max_descriptor_bytes)) d.max_descriptor_bytes = l;
  }
  // After a stage failure: reach every stage again (an unreachable one fails
  // the attempt within a few seconds) and reload it for the new epoch.
  d.reconnect = [o = o_, layout = layout_, credentials = stage_credentials_](uint64_t next_epoch)
      -> absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> {
    // Each phase's time goes into the driver's log line of the attempt.
    const auto start = std::chrono::steady_clock::now();
    const auto since = [&start] {
      return absl::StrFormat("%.3f s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
    auto stages = ConnectStages(o.stages, std::chrono::milliseconds(3000), credentials);
    if (!stages.ok()) return stages.status();
    const std::string reached = since();
    PipelineLayout next = layout;
    next.epoch = next_epoch;
    if (absl::Status s = ConfigureStages(*stages, next, o.startup_timeout); !s.ok()) {
      return Annotate(s, absl::StrCat("every stage answered GetStatus after ", reached, "; configuring failed after ",
                                      since()));
    }
    SEAM_LOG_INFO("epoch {}: every stage answered GetStatus after {}, and was READY after {}", next_epoch, reached,
                  since());
    std::vector<std::unique_ptr<StageLink>> links;
    for (StageEndpoint& e : *stages) links.push_back(MakeGrpcStageLink(e.stub, e.address, o.liveness));
    return links;
  };
  // Health follows the pipeline: NOT_SERVING while it is down (between a
  // stage failure and a successful reconnect). The driver may report before
  // the server exists; the last value is applied once it does.
  d.on_pipeline_up = [health = health_](bool up) { health->Set(up); };
  return d;
}

absl::Status CoordinatorProcess::BringUpPipeline() {
  SEAM_ASSIGN_OR_RETURN(stages_, ConnectStages(o_.stages, o_.startup_timeout, stage_credentials_));
  // Stages already configured (by a coordinator that exited or died) are
  // adopted: the pipeline starts at an epoch past theirs, so they reload and
  // drop whatever the old coordinator left in flight.
  const uint64_t epoch = AdoptionEpoch(stages_);
  layout_ = PipelineLayout{o_.model_dir, o_.tp, o_.attn_dp, epoch, layers_};
  SEAM_RETURN_IF_ERROR(ConfigureStages(stages_, layout_, o_.startup_timeout));
  // Batching and admission follow what the stages report; flags only lower it.
  std::vector<v1::StageStatus> statuses;
  for (const StageEndpoint& e : stages_) statuses.push_back(e.status);
  SEAM_ASSIGN_OR_RETURN(limits_, DerivePipelineLimits(statuses, o_.stages, o_.caps));
  SEAM_LOG_INFO("pipeline limits: {}", limits_.ToString());
  request_limits_ = RequestLimitsOf(limits_, config_);
  PipelineDriverOptions driver_options = DriverOptions(epoch);
  const uint64_t bound = DescriptorBound(request_limits_, driver_options.scheduler.max_sequences_per_microbatch,
                                         driver_options.scheduler.max_tokens_per_microbatch);
  if (driver_options.max_descriptor_bytes > 0 && bound > driver_options.max_descriptor_bytes) {
    SEAM_LOG_WARN("a microbatch may take {} bytes, more than the {} the stages take (raise their --max-step-tokens); "
                  "such microbatches fail RESOURCE_EXHAUSTED", bound, driver_options.max_descriptor_bytes);
  }
  std::vector<std::unique_ptr<StageLink>> links;
  for (StageEndpoint& e : stages_) links.push_back(MakeGrpcStageLink(e.stub, e.address, o_.liveness));
  SEAM_ASSIGN_OR_RETURN(driver_, PipelineDriver::Create(driver_options, std::move(links)));
  return absl::OkStatus();
}

absl::Status CoordinatorProcess::StartMetrics() {
  if (o_.metrics_listen.empty() && !o_.metrics_on_http) return absl::OkStatus();
  metrics::MetricsEndpointOptions mo;
  mo.listen = o_.metrics_listen;  // empty: no listener of its own, the HTTP API serves it
  mo.tls_cert_file = o_.server_security.tls_cert_file;  // HTTPS with the client API's certificate when it has one
  mo.tls_key_file = o_.server_security.tls_key_file;
  mo.insecure = o_.server_security.insecure;
  auto started = metrics::MetricsEndpoint::Start(mo);
  if (!started.ok()) {
    const absl::Status& s = started.status();
    return Failure(absl::Status(s.code(), absl::StrCat("--metrics-listen: ", s.message())),
                   absl::IsFailedPrecondition(s));
  }
  metrics_endpoint_ = std::move(*started);
  MetricsModelInfo info;
  info.model_name = http_options_.model_name;
  info.block_size = limits_.kv_block_size;
  info.kv_blocks_per_dp_group = limits_.kv_blocks_per_dp_group;
  info.dp_groups = o_.attn_dp;
  info.max_model_len = limits_.max_context;
  metrics_ = std::make_unique<CoordinatorMetrics>(*metrics_endpoint_, driver_.get(), info);
  if (!o_.metrics_listen.empty()) {
    SEAM_LOG_INFO("metrics on {}://{}/metrics (port {})", mo.tls_cert_file.empty() ? "http" : "https",
                  o_.metrics_listen, metrics_endpoint_->port());
  }
  return absl::OkStatus();
}

absl::Status CoordinatorProcess::StartGrpc() {
  service_ = std::make_unique<CoordinatorService>(driver_.get(), request_limits_,
                                                  MakeMetadata(config_, o_, layers_, StagesDtype(stages_)),
                                                  text_.get(), metrics_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  security::ListenExclusively(builder);  // a second coordinator on this port fails here
  builder.AddListeningPort(o_.listen, server_credentials_, &port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) return security::ListenFailure(o_.listen, "--listen");
  if (!o_.health_listen.empty()) {
    SEAM_ASSIGN_OR_RETURN(health_port_, security::HealthPort::Start(o_.health_listen));
  }
  health_->Attach(server_->GetHealthCheckService(), health_port_.get());
  return absl::OkStatus();
}

absl::Status CoordinatorProcess::StartHttp() {
  if (o_.http_listen.empty()) return absl::OkStatus();
  auto started =
      http::OpenAiServer::Start(http_options_, http::OpenAiBackend{driver_.get(), request_limits_, text_.get(),
                                                                   metrics_.get(),
                                                                   o_.metrics_on_http ? metrics_endpoint_.get()
                                                                                      : nullptr});
  if (started.ok() && !o_.http_port_file.empty() && !WritePortFile(o_.http_port_file, (*started)->port())) {
    started = absl::InternalError(absl::StrCat("cannot write port file ", o_.http_port_file));
  }
  if (!started.ok()) {
    const absl::Status& s = started.status();
    return Failure(s, absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s));
  }
  http_server_ = std::move(*started);
  return absl::OkStatus();
}

absl::Status CoordinatorProcess::StartServing() {
  SEAM_RETURN_IF_ERROR(StartMetrics());
  SEAM_RETURN_IF_ERROR(StartGrpc());
  SEAM_RETURN_IF_ERROR(StartHttp());
  if (!o_.port_file.empty() && !WritePortFile(o_.port_file, port_)) {
    return absl::InternalError(absl::StrCat("cannot write port file ", o_.port_file));
  }
  return absl::OkStatus();
}

void CoordinatorProcess::Stop() {
  if (stopped_) return;
  stopped_ = true;
  health_->Stop();
  if (driver_ != nullptr) driver_->Shutdown();  // every live call is answered UNAVAILABLE
  if (http_server_ != nullptr) http_server_->Stop();  // its streams ended with the driver's calls
  health_->Attach(nullptr, nullptr);  // the health port goes before the gate
  // Calls were all answered by the driver; a short grace for their last
  // writes, then open client channels are cut, so the exit is prompt.
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  // The stages are left configured, not drained: the next coordinator adopts
  // them for a later epoch (a drained stage takes no new configuration).
}

}  // namespace

int RunCoordinatorServer(const CoordinatorServerOptions& o, std::ostream& err) {
  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  CoordinatorProcess process(o);
  absl::Status up = process.CheckArguments();
  if (up.ok()) up = process.BringUpPipeline();
  if (up.ok()) up = process.StartServing();
  if (!up.ok()) {
    err << "seam-coordinator: " << (ExitCodeOf(up) == 2 ? std::string(up.message()) : up.ToString()) << "\n";
    return ExitCodeOf(up);
  }
  err << "seam-coordinator: serving on port " << process.port() << " with " << o.stages.size() << " stages\n";
  int signal = 0;
  sigwait(&signals, &signal);
  process.Stop();
  return 0;
}

}  // namespace seam::coordinator

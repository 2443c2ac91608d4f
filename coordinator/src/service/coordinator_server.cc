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

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "http/openai_server.h"
#include "seam/core/logging.h"
#include "seam/security/listen_port.h"
#include "seam/security/bearer_token.h"
#include "seam/security/health_port.h"
#include "seam/security/listen_address.h"
#include "seam/weights/model_config.h"
#include "service/coordinator_service.h"
#include "service/grpc_stage_link.h"
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

int RunCoordinatorServer(const CoordinatorServerOptions& o, std::ostream& err) {
  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(o.model_dir);
  if (!config.ok()) return err << "seam-coordinator: " << config.status() << "\n", 2;
  if (absl::Status s = weights::ValidateParallel(*config, o.tp, o.attn_dp); !s.ok()) {
    return err << "seam-coordinator: " << s << "\n", 2;
  }
  auto layers = SplitLayers(config->num_hidden_layers, o.stages.size(), o.layers);
  if (!layers.ok()) return err << "seam-coordinator: " << layers.status() << "\n", 2;
  // Text prompts and completions: the checkpoint's tokenizer, if it has one.
  absl::StatusOr<std::unique_ptr<ModelText>> text = ModelText::Load(o.model_dir);
  if (!text.ok()) return err << "seam-coordinator: " << text.status() << "\n", 2;
  if (*text == nullptr) SEAM_LOG_INFO("{} has no tokenizer.json: prompts are token ids only", o.model_dir);
  http::OpenAiServerOptions http_options;
  http_options.listen = o.http_listen;
  http_options.security = o.server_security;
  http_options.model_name = ServedModelName(o);
  if (!o.http_listen.empty()) {
    if (absl::Status s = http::OpenAiServer::CheckOptions(http_options); !s.ok()) {
      return err << "seam-coordinator: " << s.message() << "\n", 2;
    }
  }
  security::ServerSecurityOptions server_security = o.server_security;
  server_security.open_path_prefixes = {security::kHealthPathPrefix};  // probes; reflection needs the token
  auto server_credentials = security::MakeServerCredentials(server_security, o.listen);
  if (!server_credentials.ok()) return err << "seam-coordinator: " << server_credentials.status().message() << "\n", 2;
  for (const std::string& stage : o.stages) {
    if (!o.stage_security.tls() && !security::IsLoopbackAddress(stage) && !o.server_security.insecure) {
      return err << "seam-coordinator: refusing to reach stage " << stage
                 << " without TLS: pass --tls-ca (and --tls-client-cert/--tls-client-key for mutual TLS), "
                    "or --insecure\n",
             2;
    }
  }
  auto stage_credentials = security::MakeChannelCredentials(o.stage_security, o.stages.front());
  if (!stage_credentials.ok()) return err << "seam-coordinator: " << stage_credentials.status().message() << "\n", 2;
  // Ports first: a second coordinator on a taken port must not adopt the stages of the one that holds it.
  if (absl::Status s = CheckPorts(o); !s.ok()) return err << "seam-coordinator: " << s.message() << "\n", 1;

  auto stages = ConnectStages(o.stages, o.startup_timeout, *stage_credentials);
  if (!stages.ok()) return err << "seam-coordinator: " << stages.status() << "\n", 1;
  PipelineDriverOptions driver_options;
  driver_options.scheduler.pipeline_stages = o.stages.size();
  driver_options.scheduler.dp_groups = o.attn_dp;
  driver_options.scheduler.max_queue = o.max_queue;
  driver_options.scheduler.max_decode_steps = o.decode_steps;
  driver_options.scheduler.first_decode_steps = o.decode_ramp_start > 0 ? o.decode_ramp_start : o.decode_steps;
  driver_options.scheduler.max_tokens_per_microbatch = o.max_batch_tokens;
  driver_options.stage_timeout = o.stage_timeout;
  driver_options.stage_timeout_per_token = o.stage_timeout_per_token;
  // Stages already configured (by a coordinator that exited or died) are
  // adopted: the pipeline starts at an epoch past theirs, so they reload and
  // drop whatever the old coordinator left in flight.
  const uint64_t epoch = AdoptionEpoch(*stages);
  driver_options.scheduler.first_epoch = epoch;
  PipelineLayout layout{o.model_dir, o.tp, o.attn_dp, epoch, *layers};
  // After a stage failure: reach every stage again (an unreachable one fails
  // the attempt within a few seconds) and reload it for the new epoch.
  driver_options.reconnect = [o, layout, credentials = *stage_credentials](uint64_t next_epoch)
      -> absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> {
    auto stages = ConnectStages(o.stages, std::chrono::milliseconds(3000), credentials);
    if (!stages.ok()) return stages.status();
    PipelineLayout next = layout;
    next.epoch = next_epoch;
    if (absl::Status s = ConfigureStages(*stages, next, o.startup_timeout); !s.ok()) return s;
    std::vector<std::unique_ptr<StageLink>> links;
    for (StageEndpoint& e : *stages) links.push_back(MakeGrpcStageLink(e.stub, e.address, o.liveness));
    return links;
  };
  // Health follows the pipeline: NOT_SERVING while it is down (between a
  // stage failure and a successful reconnect). The driver may report before
  // the server exists; the last value is applied once it does.
  auto health = std::make_shared<HealthGate>();
  driver_options.on_pipeline_up = [health](bool up) { health->Set(up); };
  if (absl::Status s = ConfigureStages(*stages, layout, o.startup_timeout); !s.ok()) {
    return err << "seam-coordinator: " << s << "\n", 1;
  }
  // Admission follows the KV the stages hold; --kv-blocks may only lower it.
  absl::StatusOr<KvCapacity> kv = PipelineKvCapacity(*stages);
  if (!kv.ok()) return err << "seam-coordinator: " << kv.status() << "\n", 1;
  int64_t kv_blocks = kv->blocks_per_dp_group;
  if (o.kv_blocks > 0 && o.kv_blocks < kv_blocks) kv_blocks = o.kv_blocks;
  if (o.kv_blocks > kv->blocks_per_dp_group) {
    SEAM_LOG_WARN("--kv-blocks {} exceeds the {} blocks per DP group the stages hold; admitting against theirs",
                  o.kv_blocks, kv->blocks_per_dp_group);
  }
  driver_options.scheduler.kv_blocks_per_dp_group =
      static_cast<int>(std::min<int64_t>(kv_blocks, std::numeric_limits<int>::max()));
  driver_options.scheduler.block_size = kv->block_size;
  SEAM_LOG_INFO("KV admission: {} blocks of {} tokens per attention-DP group", kv_blocks, kv->block_size);
  RequestLimits limits;
  limits.vocab_size = config->vocab_size;
  limits.max_positions = config->max_position_embeddings;
  limits.max_prompt_tokens = std::min(o.max_prompt_tokens, driver_options.scheduler.max_tokens_per_microbatch);
  // The stages own their descriptor limit (their gRPC receive limit); the
  // driver never sends a descriptor over the least of them.
  uint64_t stage_limit = 0;
  for (const StageEndpoint& e : *stages) {
    const uint64_t l = e.status.max_descriptor_bytes();
    if (l > 0 && (stage_limit == 0 || l < stage_limit)) stage_limit = l;
  }
  driver_options.max_descriptor_bytes = stage_limit;
  const uint64_t bound = DescriptorBound(limits, driver_options.scheduler.max_sequences_per_microbatch,
                                         driver_options.scheduler.max_tokens_per_microbatch);
  if (stage_limit > 0 && bound > stage_limit) {
    SEAM_LOG_WARN("a microbatch may take {} bytes, more than the {} the stages take (raise their --max-step-tokens); "
                  "such microbatches fail RESOURCE_EXHAUSTED", bound, stage_limit);
  }
  std::vector<std::unique_ptr<StageLink>> links;
  for (StageEndpoint& e : *stages) links.push_back(MakeGrpcStageLink(e.stub, e.address, o.liveness));
  auto driver = PipelineDriver::Create(driver_options, std::move(links));
  if (!driver.ok()) return err << "seam-coordinator: " << driver.status() << "\n", 1;

  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<CoordinatorMetrics> metrics;
  if (!o.metrics_listen.empty()) {
    metrics::MetricsEndpointOptions mo;
    mo.listen = o.metrics_listen;  // HTTPS with the client API's certificate when it has one
    mo.tls_cert_file = o.server_security.tls_cert_file;
    mo.tls_key_file = o.server_security.tls_key_file;
    mo.insecure = o.server_security.insecure;
    auto started = metrics::MetricsEndpoint::Start(mo);
    if (!started.ok()) {
      (*driver)->Shutdown();
      return err << "seam-coordinator: --metrics-listen: " << started.status().message() << "\n",
             absl::IsFailedPrecondition(started.status()) ? 2 : 1;
    }
    metrics_endpoint = std::move(*started);
    metrics = std::make_unique<CoordinatorMetrics>(*metrics_endpoint, driver->get());
    SEAM_LOG_INFO("metrics on {}://{}/metrics (port {})", mo.tls_cert_file.empty() ? "http" : "https",
                  o.metrics_listen, metrics_endpoint->port());
  }
  CoordinatorService service(driver->get(), limits, MakeMetadata(*config, o, *layers, StagesDtype(*stages)), text->get(), metrics.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  security::ListenExclusively(builder);  // a second coordinator on this port fails here
  builder.AddListeningPort(o.listen, *server_credentials, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    (*driver)->Shutdown();
    return err << "seam-coordinator: " << security::ListenFailure(o.listen, "--listen").message() << "\n", 1;
  }
  std::unique_ptr<security::HealthPort> health_port;
  if (!o.health_listen.empty()) {
    auto started = security::HealthPort::Start(o.health_listen);
    if (!started.ok()) {
      (*driver)->Shutdown();
      server->Shutdown();
      return err << "seam-coordinator: " << started.status().message() << "\n", 1;
    }
    health_port = std::move(*started);
  }
  health->Attach(server->GetHealthCheckService(), health_port.get());
  std::unique_ptr<http::OpenAiServer> http_server;
  if (!o.http_listen.empty()) {
    auto started = http::OpenAiServer::Start(http_options,
                                              http::OpenAiBackend{driver->get(), limits, text->get(), metrics.get()});
    if (started.ok() && !o.http_port_file.empty() && !WritePortFile(o.http_port_file, (*started)->port())) {
      started = absl::InternalError(absl::StrCat("cannot write port file ", o.http_port_file));
    }
    if (!started.ok()) {
      health->Attach(nullptr, nullptr);
      (*driver)->Shutdown();
      server->Shutdown();
      const bool operator_error =
          absl::IsInvalidArgument(started.status()) || absl::IsFailedPrecondition(started.status());
      return err << "seam-coordinator: " << started.status().message() << "\n", operator_error ? 2 : 1;
    }
    http_server = std::move(*started);
  }
  if (!o.port_file.empty() && !WritePortFile(o.port_file, port)) {
    health->Attach(nullptr, nullptr);
    (*driver)->Shutdown();
    server->Shutdown();
    return err << "seam-coordinator: cannot write port file " << o.port_file << "\n", 1;
  }
  err << "seam-coordinator: serving on port " << port << " with " << o.stages.size() << " stages\n";

  int signal = 0;
  sigwait(&signals, &signal);
  health->Stop();
  (*driver)->Shutdown();  // every live call is answered UNAVAILABLE
  if (http_server) http_server->Stop();  // its streams ended with the driver's calls
  health->Attach(nullptr, nullptr);  // the health port goes before the gate
  // Calls were all answered by the driver; a short grace for their last
  // writes, then open client channels are cut, so the exit is prompt.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  // The stages are left configured, not drained: the next coordinator adopts
  // them for a later epoch (a drained stage takes no new configuration).
  return 0;
}

}  // namespace seam::coordinator

// CoordinatorService: validation, hand-off to the driver, and GetMetadata
// from the configured topology plus the driver's view of stage health.
#include "service/coordinator_service.h"

#include "seam/core/status.h"
#include "service/call_reactors.h"
#include "service/unparsable_requests.h"

namespace seam::coordinator {
namespace {

std::chrono::steady_clock::time_point SteadyDeadline(const grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return std::chrono::steady_clock::time_point::max();
  const auto left = deadline - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

// The server id names the call in the driver's messages and in the stages'
// descriptors and errors, so that every line about the call, on the
// coordinator or a stage, names the same id; the client's own id stays on
// the coordinator's lines.
DriverCall MakeCall(RequestIdentity identity, const google::protobuf::RepeatedPtrField<v1::TokenSequence>& seqs,
                    const grpc::CallbackServerContext* context) {
  DriverCall call;
  call.identity = std::move(identity);
  for (const v1::TokenSequence& s : seqs) call.prompts.emplace_back(s.token_ids().begin(), s.token_ids().end());
  call.deadline = SteadyDeadline(context);
  return call;
}

}  // namespace

CoordinatorService::CoordinatorService(PipelineDriver* driver, RequestLimits limits, v1::Metadata metadata,
                                       const ModelText* text, CoordinatorMetrics* metrics)
    : driver_(driver), limits_(limits), metadata_(std::move(metadata)), text_(text), metrics_(metrics) {
  // The methods' indices in seam.v1.Coordinator, as the generated service numbers them.
  MarkMethodCallback(0, ServerStreamingHandler<v1::GenerateRequest, v1::GenerateResponse>(
                            "seam.v1.GenerateRequest",
                            [this](grpc::CallbackServerContext* c, const v1::GenerateRequest* q) {
                              return Generate(c, q);
                            }));
  MarkMethodCallback(1, UnaryHandler<v1::GenerateRequest, v1::GenerateResult>(
                            "seam.v1.GenerateRequest",
                            [this](grpc::CallbackServerContext* c, const v1::GenerateRequest* q,
                                   v1::GenerateResult* r) { return GenerateAll(c, q, r); }));
  MarkMethodCallback(2, UnaryHandler<v1::ScoreRequest, v1::ScoreResult>(
                            "seam.v1.ScoreRequest", [this](grpc::CallbackServerContext* c, const v1::ScoreRequest* q,
                                                           v1::ScoreResult* r) { return Score(c, q, r); }));
  MarkMethodCallback(3, UnaryHandler<v1::GetMetadataRequest, v1::Metadata>(
                            "seam.v1.GetMetadataRequest",
                            [this](grpc::CallbackServerContext* c, const v1::GetMetadataRequest* q, v1::Metadata* r) {
                              return GetMetadata(c, q, r);
                            }));
}

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

v1::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kMaxTokens: return v1::FINISH_REASON_MAX_NEW_TOKENS;
    case FinishReason::kStopToken: return v1::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kStopString: return v1::FINISH_REASON_STOP_STRING;
    case FinishReason::kCancelled: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

MeteredCall* CoordinatorService::Metered(CallObserver* inner, const std::string& server_id,
                                         const std::string& client_id,
                                         const google::protobuf::RepeatedPtrField<v1::TokenSequence>& sequences,
                                         bool score) const {
  std::vector<int> prompt_tokens;
  for (const v1::TokenSequence& s : sequences) prompt_tokens.push_back(s.token_ids_size());
  // The client's id is logged only up to the length validation allows.
  return new MeteredCall(inner, metrics_,
                         RequestLogFields(server_id, client_id, static_cast<size_t>(limits_.max_request_id_bytes)),
                         "grpc", std::move(prompt_tokens), score);
}

std::string CoordinatorService::StartCall(grpc::CallbackServerContext* context) {
  std::string id = NewServerRequestId();
  context->AddTrailingMetadata(kServerRequestIdMetadata, id);
  return id;
}

void CoordinatorService::SubmitValidGeneration(const std::string& server_id, const v1::GenerateRequest& request,
                                               grpc::CallbackServerContext* context, CallObserver* observer) {
  DriverCall call = MakeCall(Identity(server_id, request.request_id()), request.prompts(), context);
  call.sampling = request.sampling();
  call.prefix_cache = !request.skip_prefix_cache();
  call.cache_salt = request.cache_salt();
  call.sampling.set_max_new_tokens(static_cast<uint32_t>(ResolvedMaxNewTokens(request.sampling(), limits_)));
  call.text = TextStreams(text_);
  call.observer = observer;
  driver_->Submit(std::move(call));
}

RequestIdentity CoordinatorService::Identity(const std::string& server_id, const std::string& client_id) const {
  return RequestIdentity{server_id, client_id.substr(0, static_cast<size_t>(limits_.max_request_id_bytes))};
}

absl::Status CoordinatorService::Validate(const v1::GenerateRequest& request) const {
  SEAM_RETURN_IF_ERROR(ValidateGenerateRequest(request, limits_));
  return ValidateTextSampling(request, text_ != nullptr);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* CoordinatorService::Generate(grpc::CallbackServerContext* context,
                                                                             const v1::GenerateRequest* request) {
  const std::string id = StartCall(context);
  v1::GenerateRequest scratch;
  absl::StatusOr<const v1::GenerateRequest*> tokens = WithTokenPrompts(text_, *request, &scratch);
  auto* reactor = new GenerateStreamReactor(request->request_id(), id);
  absl::Status st = tokens.ok() ? Validate(**tokens) : tokens.status();
  if (!st.ok()) {
    Metered(reactor, id, request->request_id(), {}, false)->OnDone(st);
    return reactor;
  }
  SubmitValidGeneration(id, **tokens, context, Metered(reactor, id, request->request_id(), (*tokens)->prompts(), false));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GenerateAll(grpc::CallbackServerContext* context,
                                                          const v1::GenerateRequest* request,
                                                          v1::GenerateResult* result) {
  const std::string id = StartCall(context);
  // Validation first: nothing is built per prompt for a request refused.
  v1::GenerateRequest scratch;
  absl::StatusOr<const v1::GenerateRequest*> tokens = WithTokenPrompts(text_, *request, &scratch);
  absl::Status st = tokens.ok() ? Validate(**tokens) : tokens.status();
  if (!st.ok()) {
    auto* reactor = new UnaryCallReactor(result, nullptr, 0);
    Metered(reactor, id, request->request_id(), {}, false)->OnDone(st);
    return reactor;
  }
  result->set_request_id(request->request_id());
  result->set_server_request_id(id);
  auto* reactor = new UnaryCallReactor(result, nullptr, (*tokens)->prompts_size());
  for (int i = 0; i < (*tokens)->prompts_size(); ++i) {
    result->mutable_completions(i)->set_prompt_tokens((*tokens)->prompts(i).token_ids_size());
  }
  SubmitValidGeneration(id, **tokens, context,
                        Metered(reactor, id, request->request_id(), (*tokens)->prompts(), false));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::Score(grpc::CallbackServerContext* context,
                                                    const v1::ScoreRequest* request, v1::ScoreResult* result) {
  const std::string id = StartCall(context);
  if (absl::Status st = ValidateScoreRequest(*request, limits_); !st.ok()) {
    auto* reactor = new UnaryCallReactor(nullptr, result, 0);
    Metered(reactor, id, request->request_id(), {}, true)->OnDone(st);
    return reactor;
  }
  result->set_request_id(request->request_id());
  result->set_server_request_id(id);
  auto* reactor = new UnaryCallReactor(nullptr, result, request->sequences_size());
  DriverCall call = MakeCall(Identity(id, request->request_id()), request->sequences(), context);
  call.sampling.set_max_new_tokens(1);  // greedy; the sampled token is dropped
  call.score = true;
  call.observer = Metered(reactor, id, request->request_id(), request->sequences(), true);
  driver_->Submit(std::move(call));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetMetadata(grpc::CallbackServerContext* context,
                                                          const v1::GetMetadataRequest*, v1::Metadata* response) {
  *response = metadata_;
  *response->mutable_limits() = ServingLimitsMessage(limits_);
  const std::vector<bool> up = driver_->StagesUp();
  response->mutable_topology()->set_epoch(driver_->Epoch());
  for (int k = 0; k < response->topology().stages_size() && k < static_cast<int>(up.size()); ++k) {
    response->mutable_topology()->mutable_stages(k)->set_health(up[k] ? v1::STAGE_HEALTH_SERVING
                                                                      : v1::STAGE_HEALTH_UNREACHABLE);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace seam::coordinator

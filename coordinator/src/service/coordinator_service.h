// CoordinatorService: the client API (seam.v1.Coordinator) on gRPC's callback
// API. Reactions never block: each call is validated, handed to the
// PipelineDriver, and answered from the driver's observer callbacks.
#pragma once

#include <functional>
#include <vector>

#include "pipeline_driver.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "service/model_text.h"
#include "service/request_metrics.h"
#include "service/request_validation.h"

namespace seam::coordinator {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  // `metadata` holds the model facts and the topology as configured; stage
  // health and epoch are filled in from `driver` on each GetMetadata.
  // `text` (may be null: no tokenizer) tokenizes text prompts and decodes
  // completions; `metrics` (may be null) counts every call; both must
  // outlive the service. Each call gets a server request id, logged with its
  // one completion line and sent back.
  // A request whose bytes are not its method's message is refused
  // INVALID_ARGUMENT naming the message (unparsable_requests.h).
  CoordinatorService(PipelineDriver* driver, RequestLimits limits, v1::Metadata metadata,
                     const ModelText* text = nullptr, CoordinatorMetrics* metrics = nullptr);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* GenerateAll(grpc::CallbackServerContext* context, const v1::GenerateRequest* request,
                                        v1::GenerateResult* result) override;
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context, const v1::ScoreRequest* request,
                                  v1::ScoreResult* result) override;
  grpc::ServerUnaryReactor* GetMetadata(grpc::CallbackServerContext* context, const v1::GetMetadataRequest* request,
                                        v1::Metadata* response) override;

 private:
  // Hands a generation request that passed ValidateGenerateRequest to the driver.
  void SubmitValidGeneration(const std::string& server_id, const v1::GenerateRequest& request,
                             grpc::CallbackServerContext* context, CallObserver* observer);
  // The call's identity: `server_id` and the client's id cut to the validated length.
  RequestIdentity Identity(const std::string& server_id, const std::string& client_id) const;
  // ValidateGenerateRequest, then what needs the tokenizer (stop strings).
  absl::Status Validate(const v1::GenerateRequest& request) const;
  // `inner` wrapped for metrics and the call's log lines.
  MeteredCall* Metered(CallObserver* inner, const std::string& server_id, const std::string& client_id,
                       const google::protobuf::RepeatedPtrField<v1::TokenSequence>& sequences, bool score) const;
  // A new server request id, also sent as the call's trailing metadata
  // (kServerRequestIdMetadata), so that a failed call names it too.
  static std::string StartCall(grpc::CallbackServerContext* context);

  PipelineDriver* driver_;
  RequestLimits limits_;
  v1::Metadata metadata_;
  const ModelText* text_;
  CoordinatorMetrics* metrics_;
};

// The trailing metadata key of every Generate, GenerateAll and Score call:
// the server request id (as GenerateResponse.server_request_id), present
// on failures as well.
inline constexpr char kServerRequestIdMetadata[] = "seam-server-request-id";

// grpc::Status with the same code and message.
grpc::Status ToGrpc(const absl::Status& status);
v1::FinishReason ToProto(FinishReason reason);

}  // namespace seam::coordinator

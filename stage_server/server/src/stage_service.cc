// StageControl methods: each forwards to the stage actor.
#include "stage_service.h"

#include <string>

#include "run_stream.h"

namespace seam::server {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

grpc::ServerUnaryReactor* StageService::Configure(grpc::CallbackServerContext* context,
                                                  const v1::StageConfig* request, v1::StageStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  actor_->Configure(*request, [reactor, response](absl::Status status, v1::StageStatus now) {
    *response = std::move(now);
    reactor->Finish(ToGrpc(status));
  });
  return reactor;
}

grpc::ServerUnaryReactor* StageService::GetStatus(grpc::CallbackServerContext* context,
                                                  const v1::GetStatusRequest*, v1::StageStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  *response = actor_->Status();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* StageService::Drain(grpc::CallbackServerContext* context, const v1::DrainRequest*,
                                              v1::StageStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  actor_->Drain(/*abandon=*/false, [reactor, response](v1::StageStatus now) {
    *response = std::move(now);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* StageService::Shutdown(grpc::CallbackServerContext* context,
                                                 const v1::ShutdownRequest* request, v1::StageStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  actor_->Drain(request->abandon_in_flight(), [this, reactor, response](v1::StageStatus now) {
    *response = std::move(now);
    reactor->Finish(grpc::Status::OK);
    on_shutdown_();
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::MicrobatchDescriptor, v1::MicrobatchResult>* StageService::Run(
    grpc::CallbackServerContext*) {
  return new RunStream(actor_);
}

}  // namespace seam::server

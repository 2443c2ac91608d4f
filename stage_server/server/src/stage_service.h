// StageService: the StageControl gRPC service of one stage server, on the
// callback API. Every method hands its work to the StageActor and finishes
// from the actor's answer; none blocks a gRPC thread.
#pragma once

#include <functional>

#include "seam/server/stage_actor.h"
#include "seam/v1/stage_service.grpc.pb.h"

namespace seam::server {

class StageService final : public v1::StageControl::CallbackService {
 public:
  // `on_shutdown` runs once a Shutdown call has drained (or abandoned) the stage.
  StageService(StageActor* actor, std::function<void()> on_shutdown)
      : actor_(actor), on_shutdown_(std::move(on_shutdown)) {}

  grpc::ServerUnaryReactor* Configure(grpc::CallbackServerContext* context, const v1::StageConfig* request,
                                      v1::StageStatus* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context, const v1::GetStatusRequest* request,
                                      v1::StageStatus* response) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* context, const v1::DrainRequest* request,
                                  v1::StageStatus* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context, const v1::ShutdownRequest* request,
                                     v1::StageStatus* response) override;
  grpc::ServerBidiReactor<v1::MicrobatchDescriptor, v1::MicrobatchResult>* Run(
      grpc::CallbackServerContext* context) override;

 private:
  StageActor* actor_;
  std::function<void()> on_shutdown_;
};

}  // namespace seam::server

// GrpcStageLink: StageLink over StageControl.Run, one bidirectional stream per
// stage with a thread that reads results. A broken stream (a dead stage)
// reports UNAVAILABLE with the gRPC status it ended with.
#pragma once

#include <memory>
#include <string>

#include "seam/v1/stage_service.grpc.pb.h"
#include "stage_link.h"

namespace seam::coordinator {

std::unique_ptr<StageLink> MakeGrpcStageLink(std::shared_ptr<v1::StageControl::Stub> stub, std::string address);

}  // namespace seam::coordinator

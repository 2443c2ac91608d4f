// GrpcStageLink: StageLink over StageControl.Run, one bidirectional stream per
// stage with a thread that reads results. A broken stream (a dead stage)
// reports UNAVAILABLE with the gRPC status it ended with. While a microbatch
// is outstanding, a second thread probes the stage's GetStatus: a stage that
// misses `misses` probes in a row (killed, stopped, its link cut) is reported
// broken and the stream is cancelled, however long its work may take.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "seam/v1/stage_service.grpc.pb.h"
#include "stage_link.h"

namespace seam::coordinator {

struct StageLivenessOptions {
  std::chrono::milliseconds interval{1000};  // from one probe's start to the next
  std::chrono::milliseconds timeout{1000};   // each probe's deadline
  int misses = 3;                            // probes missed in a row before the stage is down
};

std::unique_ptr<StageLink> MakeGrpcStageLink(std::shared_ptr<v1::StageControl::Stub> stub, std::string address,
                                             StageLivenessOptions liveness = {});

}  // namespace seam::coordinator

// Device handoffs in a build without the CUDA path: Create refuses, so a
// stage keeps its links on the host path with no build-time switch of its own.
#include "seam/handoff/device_handoff.h"

namespace seam::handoff {

absl::StatusOr<std::unique_ptr<DeviceHandoffSender>> DeviceHandoffSender::Create(UcxWorker&, UcxEndpoint&,
                                                                                 DeviceLinkOptions) {
  return absl::FailedPreconditionError("device handoffs: this build has no CUDA path");
}

absl::StatusOr<std::unique_ptr<DeviceHandoffReceiver>> DeviceHandoffReceiver::Create(UcxWorker&, UcxEndpoint&,
                                                                                     DeviceLinkOptions) {
  return absl::FailedPreconditionError("device handoffs: this build has no CUDA path");
}

}  // namespace seam::handoff

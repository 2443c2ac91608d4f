// Where a pipeline piece's handoff tensors cross the stage group's boundary:
// into a rank (onto its device, shared when already there) and out of it
// (to the host for the UCX path, or kept on the rank's GPU for a device
// transport). Internal to seam_runtime.
#pragma once

#include "absl/status/statusor.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/core/device.h"

namespace seam::runtime::internal {

// The handoff's tensors on `device` (shared, not copied, when already there).
absl::StatusOr<boundary::PipelineTensors> Placed(const boundary::PipelineTensors& in, Device device);

// The handoff a rank on `device` leaves: a host copy, or with `on_device`
// (a CUDA rank) its own tensors, made contiguous, with the rank's current
// stream synchronised so that any stream may read them. They may be a decode
// graph's fixed buffers: valid until the rank's next step.
absl::StatusOr<boundary::PipelineTensors> Leaving(const boundary::PipelineTensors& out, Device device,
                                                  bool on_device);

}  // namespace seam::runtime::internal

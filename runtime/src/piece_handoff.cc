// A piece's handoff in and out of its group (see piece_handoff.h).
#include "src/piece_handoff.h"

#include "seam/core/device_memory.h"
#include "seam/core/status.h"

namespace seam::runtime::internal {

absl::StatusOr<boundary::PipelineTensors> Placed(const boundary::PipelineTensors& in, Device device) {
  boundary::PipelineTensors out = in;
  for (Tensor* t : {&out.hidden, &out.residual}) {
    if (t->defined()) {
      SEAM_ASSIGN_OR_RETURN(*t, t->On(device));
    }
  }
  return out;
}

absl::StatusOr<boundary::PipelineTensors> Leaving(const boundary::PipelineTensors& out, Device device,
                                                  bool on_device) {
  if (!on_device || !device.is_cuda()) return Placed(out, Device::CPU());
  boundary::PipelineTensors kept = out;
  bool any = false;
  for (Tensor* t : {&kept.hidden, &kept.residual}) {
    if (!t->defined()) continue;
    any = true;
    if (!t->is_contiguous()) *t = t->Clone();  // on the rank's stream
  }
  // A device transport reads these on streams of its own: the rank's stream
  // must be done writing them. The group's Synchronize waits only for streams
  // that ran collectives, which a TP 1 group has none of.
  if (any) SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
  return kept;
}

}  // namespace seam::runtime::internal

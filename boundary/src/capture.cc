#include "seam/boundary/capture.h"

#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/plan.h"
#include "seam/boundary/stream_ops.h"
#include "seam/core/status.h"

namespace seam::boundary {

CaptureFn AuxCollector::capture() {
  return [this](const Tensor& value, bool owned) {
    if (owned) {
      values_.push_back(value);
      ++owned_;
    } else {
      values_.push_back(value.Clone());
      ++copies_;
    }
  };
}

absl::StatusOr<CapturedOutput> CaptureOutput(const Hidden& hidden, ForwardBatch& batch) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  ResidualStream* stream = batch.stream.get();
  SEAM_RETURN_IF_ERROR(stream->CheckIdentity(hidden));
  const Contribution* pending = stream->pending();
  if (pending != nullptr) {  // refuse before touching the value, so it stays usable
    if (pending->deferred != nullptr) return errors::SnapshotOfFinalizeHandoff();
    if (!pending->update->caps().plain_add) return errors::SnapshotNeedsPlainUpdate(pending->update->name());
  }
  const StagePlan* last = batch.last_plan;
  const bool declared_sum = pending != nullptr && pending->owed != SumGroup::kNone && last != nullptr &&
                            last->declaration.kind == StageKind::kAttention &&
                            last->declaration.reduction == ProducerReduction::kAlwaysPartial;
  CapturedOutput out;
  if (pending == nullptr || declared_sum) {
    SEAM_ASSIGN_OR_RETURN(out.snapshot, Snapshot(batch));  // the sum runs on a copy
    const bool owes = hidden.owes_sum();
    const Tensor value = ResidualStream::ValueOf(hidden);
    stream->Consume();
    out.hidden = stream->Issue(value, owes);
    return out;
  }
  SEAM_ASSIGN_OR_RETURN(out.hidden, CompleteOutput(hidden, batch));
  SEAM_ASSIGN_OR_RETURN(out.snapshot, Snapshot(batch));
  return out;
}

}  // namespace seam::boundary

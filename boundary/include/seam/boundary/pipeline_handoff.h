// Pipeline handoff of a residual stream (to_pp / from_pp). The sender
// completes every sum the last stage's output still owes, then exports the
// stream as plain tensors on this rank's residual rows: a written stream as
// its residual alone, a pending one as the completed contribution plus the
// residual (the plain update is applied by the receiver's first entry, so a
// pipeline split keeps the fused add+norm and is bit-identical to no split).
// The receiver rebuilds the stream from what the producer declares; the
// transport (UCX, headers, checksums) lives outside boundary/.
#pragma once

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/residual_stream.h"
#include "seam/boundary/stage_boundary.h"

namespace seam::boundary {

struct PipelineTensors {
  StreamState state = StreamState::kWritten;  // kWritten or kPending (nothing owed)
  RowForm rows = RowForm::kDpRows;            // rows of both tensors on this rank
  Tensor hidden;                              // written: the residual; pending: the contribution
  Tensor residual;                            // pending only
};

// Completes owed work and exports the stream; releases the batch's stream.
absl::StatusOr<PipelineTensors> ToPp(const Hidden& hidden, ForwardBatch& batch);

// The one shape check of a received handoff: a written or pending state,
// hidden [rows its form has on this rank, hidden_size] (hidden_size -1: any
// width) and a pending residual of the same shape. INVALID_ARGUMENT naming
// what differs. FromPp runs it; a runner may run it on every rank first, so
// that no rank enters a collective with a handoff another rank refuses.
absl::Status CheckPipelineTensors(const PipelineTensors& in, const BatchRows& rows, int64_t hidden_size);

// Rebuilds the batch's stream from a handoff for `first`, the receiving
// rank's first stage. INVALID_ARGUMENT when rows or widths do not fit the
// batch; FAILED_PRECONDITION when the state is not one the first stage's
// producer can hand over.
absl::StatusOr<Hidden> FromPp(const PipelineTensors& in, ForwardBatch& batch, const StageBoundary& first);

}  // namespace seam::boundary

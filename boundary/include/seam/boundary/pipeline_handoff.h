// Pipeline handoff of a residual stream (to_pp / from_pp). The sender
// completes every sum its last stage's output still owes and exports the
// stream in the state its last stage's declaration names: written (the
// residual alone) when that stage writes it before a handoff, pending (the
// completed contribution plus the residual) otherwise, so a split keeps the
// receiver's fused add+norm. Each tensor travels as one slice per
// attention-TP rank; the receiver gathers the slices back when its first
// stage needs the rows every attention-TP rank holds alike. The receiver
// takes the state from the producer's declaration (through stage facts),
// never from what arrives: a captured graph's input buffers hold every key.
// Pipeline ranks may have different TP sizes: ResliceHandoff routes the
// sender's slices to the receiver's. The transport (UCX, headers, checksums)
// lives outside boundary/.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/residual_stream.h"
#include "seam/boundary/stage_boundary.h"

namespace seam::boundary {

struct PipelineTensors {
  StreamState state = StreamState::kWritten;  // what the sender exported (a header field; FromPp ignores it)
  RowForm rows = RowForm::kAttnTpSlice;       // rows of both tensors on this rank (ToPp: its slice)
  Tensor hidden;                              // written: the residual; pending: the contribution
  Tensor residual;                            // pending only
};

// The state a stream crosses a pipeline boundary in, after `producer` (the
// last stage before the cut), from fixed facts only: written when the
// producer's update is not a plain add (e.g. MHC's expanded streams) or is
// applied at its exit; pending otherwise, with a zero contribution when the
// producer's exit already wrote the stream (an FFN landing on its own rows),
// so that the receiver's add + norm is the unsplit stack's, bit for bit.
StreamState PipelineHandoffState(const StageDeclaration& producer, BatchVariant variant, ReductionPolicy policy);

// Completes owed work, brings the stream to its declared handoff state and
// exports this rank's attention-TP slice of it; releases the batch's stream.
absl::StatusOr<PipelineTensors> ToPp(const Hidden& hidden, ForwardBatch& batch);

// The one shape check of a received handoff: a written or pending state,
// hidden [rows its form has on this rank, hidden_size] (hidden_size -1: any
// width) and a pending residual of the same shape. INVALID_ARGUMENT naming
// what differs. A runner may run it on every rank first, so that no rank
// enters a collective with a handoff another rank refuses.
absl::Status CheckPipelineTensors(const PipelineTensors& in, const BatchRows& rows, int64_t hidden_size);

// Rebuilds the batch's stream for `first`, the receiving rank's first stage,
// in the state its producer's declaration names. INVALID_ARGUMENT when rows,
// widths or the tensors that state needs do not fit; FAILED_PRECONDITION when
// `first` has no producer (it starts the stack) or is unbound. May run an
// attention-TP gather (every rank of the group must call it). Tensors on the
// DP rows (a two-batch split's parts, two_batch.h) are taken as they are, or
// narrowed to this rank's slice where the first stage keeps the residual on
// slices. This is the design's from_handoff.
absl::StatusOr<Hidden> FromPp(const PipelineTensors& in, ForwardBatch& batch, const StageBoundary& first);

// The sender's slices (one per TP rank of `from`, in rank order) routed to
// every TP rank of `to`: receiver rank j gets its attention-TP slice of its
// DP group's rows. The DP groups' row counts of each side partition the same
// rows in order. A pure function for the transport; with equal topologies it
// returns the input. INVALID_ARGUMENT when the slices do not fit.
absl::StatusOr<std::vector<PipelineTensors>> ResliceHandoff(const std::vector<PipelineTensors>& sent,
                                                            const Topology& from,
                                                            const std::vector<int64_t>& from_dp_rows,
                                                            const Topology& to, const std::vector<int64_t>& to_dp_rows,
                                                            BatchVariant variant);

}  // namespace seam::boundary

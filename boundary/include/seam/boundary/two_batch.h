// Two-batch overlap (TBO): one microbatch's forward split into two
// microbatches, A and B, each with its own ForwardBatch and ResidualStream,
// run operation by operation (operation_schedule.h) so that one's
// collectives can overlap the other's compute, and merged back afterwards.
//
// Contracts:
//   - A takes the first a_dp_rows[d] rows of every attention-DP group d and B
//     the rest, so merging puts every group's rows back in order (A's, then
//     B's). Either part may be empty on any group, or everywhere.
//   - The split brings the stream to its handoff state (what it owes
//     completed, as ToPp does) and rebuilds each part through the pipeline
//     import (FromPp, the design's from_handoff) on its own rows; a stream no
//     stage entered yet is split as the stack input and each part Start()s.
//     No tensor of one part aliases the other's: a stream is never shared.
//   - Both parts are operation-scheduled: their FFNs complete with
//     StageBoundary::CompleteNow (Finish and Exit refuse them).
//   - Every rank of the stage calls Split and Merge alike (they may gather
//     over attention TP). Single-threaded per rank, as the boundary is.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/residual_stream.h"
#include "seam/boundary/stage_boundary.h"

namespace seam::boundary {

struct TwoBatchSplit {
  // Rows of microbatch A in every attention-DP group; B takes the rest.
  std::vector<int64_t> a_dp_rows;
  // The communicators each part runs on (e.g. one set per CUDA stream, so
  // that two collectives in flight never share one); unset: the parent's.
  StageComms a_comms, b_comms;
};

struct MicrobatchPair {
  ForwardBatch a, b;
  Hidden a_hidden, b_hidden;  // the value each part passes to its next call
  ForwardBatch& batch(int i) { return i == 0 ? a : b; }
  Hidden& hidden(int i) { return i == 0 ? a_hidden : b_hidden; }
};

// Splits `batch`'s stream, whose latest value is `hidden`, into two
// microbatches that enter `next` (a stage with a producer; unused when no
// stage has entered the stream yet). The parts get microbatch ids
// 2·id + 1 and 2·id + 2, the parent's variant and batch facts, and their own
// rows. Releases the parent's stream. INVALID_ARGUMENT when a_dp_rows does
// not fit the batch's rows; FAILED_PRECONDITION with an exit scope open or
// without `next` for a stream a stage entered.
absl::StatusOr<MicrobatchPair> SplitMicrobatches(const Hidden& hidden, ForwardBatch& batch,
                                                 const TwoBatchSplit& split, const StageBoundary* next);

// Merges both parts' streams (pair.a_hidden, pair.b_hidden; both having
// left the same stage last) back into `batch`, the split's parent: each is
// brought to its handoff state, their rows are put back in order, and the
// parent's stream continues from there (its next stage, FinalNorm or ToPp).
// Releases both parts' streams. FAILED_PRECONDITION when the parts left
// different stages or an exit scope is open.
absl::StatusOr<Hidden> MergeMicrobatches(MicrobatchPair& pair, ForwardBatch& batch);

// Two parts' outputs on their DP rows (e.g. each one's FinalNorm) as the
// parent's DP rows: A's rows, then B's. INVALID_ARGUMENT when their widths,
// dtypes or devices differ.
absl::StatusOr<Tensor> MergeRows(const Tensor& a, const Tensor& b);

}  // namespace seam::boundary

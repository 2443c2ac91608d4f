// Stream helpers a model calls around its layers: enter the stack, leave it
// through the final norm, and the accessors that complete, fold, replace,
// extend or snapshot a layer's output. Each takes the value the previous
// call returned (identity-checked) and returns the next one.
#pragma once

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "seam/boundary/capture.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/residual_ops.h"
#include "seam/boundary/residual_stream.h"

namespace seam::boundary {

// Starts the batch's stream with the stack input (embedding output) on this
// rank's input rows (its DP rows; its attention-TP slice when input-scattered;
// a sequence-parallel batch's first entry scatters its DP rows itself).
absl::StatusOr<Hidden> Start(ForwardBatch& batch, const Tensor& input);
// The rows of this rank's DP rows that its stack input covers, as
// {first, count}: all of them, or its attention-TP slice when the batch is
// input-scattered (a model embeds only those token ids).
std::pair<int64_t, int64_t> StackInputRows(const ForwardBatch& batch);

struct FinalNormOptions {
  // On a rank with no rows, skip the norm kernel; owed collectives still run.
  bool skip_empty = true;
  // Runs a MoE finalize handoff fused (finalize + sum + add + norm). Without
  // it a handoff is completed unfused first. Not owned.
  FinalizeNormService* finalize_norm = nullptr;
  // The final read (null: the plain add + RMSNorm over `norm`), e.g. MHC's
  // collapse of its streams. Not owned.
  const ResidualReadout* read = nullptr;
  // Receives the final read's updated residual (on the residual's rows),
  // always borrowed. Refused with finalize_norm when a handoff arrives.
  CaptureFn capture;
  // The final read's own gather over attention TP of the rows the last stage
  // left on this rank's slice (slice → DP rows into `out`), tried before the
  // built-in gather; false declines (nothing touched). It may use only the
  // communicator it is given.
  AttnTpGatherFn attn_tp_gather;
};
// Completes what the last stage owes, applies its update, norms, and returns
// this rank's DP rows. Releases the stream.
absl::StatusOr<Tensor> FinalNorm(const Hidden& hidden, ForwardBatch& batch, const NormParams& norm,
                                 FinalNormOptions options = {});

// Completes outstanding communication; the residual update stays pending.
absl::StatusOr<Hidden> CompleteOutput(const Hidden& hidden, ForwardBatch& batch);
// Completes the contribution and applies the producer's update to the
// residual, whatever that update is (stream written).
absl::StatusOr<Hidden> Fold(const Hidden& hidden, ForwardBatch& batch);
// Replaces the stream with a written one whose residual is `residual` (any
// pending contribution is discarded; Fold first when one may be pending).
absl::StatusOr<Hidden> SetWritten(const Hidden& hidden, ForwardBatch& batch, const Tensor& residual);
// Releases the stream at a terminal exit whose output is already written.
absl::StatusOr<Tensor> TakeOutput(const Hidden& hidden, ForwardBatch& batch);
// Completes the contribution, then adds `extra` (on the residual's rows) once.
absl::StatusOr<Hidden> AddToOutput(const Hidden& hidden, ForwardBatch& batch, const Tensor& extra);
// An owned copy of residual + contribution; owed sums run on a copy, the main
// contribution stays pending. Plain updates only.
absl::StatusOr<Tensor> Snapshot(ForwardBatch& batch);

// The compute input of a mixer declared gathers_attn_tp_input = false: the
// tensor its Prepare returned when that already holds the DP rows; otherwise
// (an attention-TP slice of a scattered residual) every rank's slice gathered
// over attention TP into the DP rows, in rank order. The mixer's compute
// calls it (a model never calls a collective itself) and returns its partial
// on the DP rows. INVALID_ARGUMENT when `x` holds neither row count.
absl::StatusOr<Tensor> GatherMixerInput(const Tensor& x, ForwardBatch& batch);

}  // namespace seam::boundary

// What every model does with a step before its layers run: check the
// pipeline-piece arguments, turn the host step (sequences and tokens) into
// device token ids, the rows whose logits come back, and the reserved cache
// batch. Private to the models library.
#pragma once

#include "absl/status/statusor.h"
#include "seam/models/decoder_model.h"

namespace seam::models::internal {

// INVALID_ARGUMENT when a first piece is given a handoff, a later piece none,
// or a non-last piece nowhere to write its handoff.
absl::Status CheckPieceArgs(bool first, bool last, const boundary::PipelineTensors* in,
                            const boundary::PipelineTensors* out);

struct DeviceStep {
  Tensor ids;        // i32 [rows] on the device (first piece only)
  Tensor last_rows;  // i32 [S]: each sequence's last row (undefined: every row)
  std::vector<CacheSpan> spans;
  CacheBatch cache;  // filled by ReserveStep
};

// Validates `input` against the batch and the vocabulary (first piece) and
// the handoff's width (other pieces); uploads ids and last rows. Touches no cache.
absl::StatusOr<DeviceStep> PrepareStep(const weights::ModelConfig& config, const ModelOptions& options, bool first,
                                       bool last, const boundary::ForwardBatch& batch, const StepInput& input,
                                       const boundary::PipelineTensors* in);
// Reserves the step's spans and builds their cache batch into step->cache.
absl::Status ReserveStep(KvCache& cache, DeviceStep* step);

}  // namespace seam::models::internal

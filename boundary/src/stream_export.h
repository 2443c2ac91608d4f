// Exporting a residual stream in its handoff state, shared by the pipeline
// handoff (ToPp) and the two-batch split and merge. Internal.
#pragma once

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/residual_stream.h"

namespace seam::boundary {

// Completes what the stream owes and brings it to the state its last
// stage's declaration hands over (PipelineHandoffState), on the residual's
// own rows (`rows` of the result: DP rows or this rank's slice). Releases the
// batch's stream. FAILED_PRECONDITION on a stream no stage entered yet.
absl::StatusOr<PipelineTensors> ExportStream(const Hidden& hidden, ForwardBatch& batch);

// This rank's attention-TP slice gathered over attention TP onto its DP
// group's rows (padded or variable, as the batch is). Every rank of the group calls it.
absl::StatusOr<Tensor> GatherSlices(ForwardBatch& batch, const Tensor& slice);

}  // namespace seam::boundary

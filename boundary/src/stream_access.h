// Shared helpers of the boundary's stream-facing code: accept the value the
// model passes (stream started, identity), describe the stream's incoming
// form, and load the stream's tensors into a PathWork. Internal.
#pragma once

#include "absl/status/statusor.h"
#include "path_executor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/plan.h"
#include "seam/boundary/residual_stream.h"

namespace seam::boundary {

// The batch's stream after checking it exists and `hidden` is its latest value.
// The value is consumed: passing it again is an identity error.
absl::StatusOr<ResidualStream*> AcceptValue(ForwardBatch& batch, const Hidden& hidden);
IncomingForm IncomingOf(const ResidualStream& stream);
// c ← the pending contribution (or the stack input when initial), r ← the residual.
PathWork WorkFrom(const ResidualStream& stream, const Hidden& hidden);
// Runs a pending finalize handoff's unfused completion (the producer's
// finalize); the sum it owes stays owed. No-op without a handoff.
absl::Status ResolveDeferred(ResidualStream& stream);
// Completes the contribution's owed sum onto the residual's rows (in `work`);
// a contribution already on this rank's slice narrows the residual to it.
absl::Status CompleteInto(ForwardBatch& batch, PathWork* work);

}  // namespace seam::boundary

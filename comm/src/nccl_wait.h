// Deadline-bounded waits for a non-blocking NCCL communicator: until its
// pending call settles, and until a stream finished the enqueued work. Both
// watch ncclCommGetAsyncError so a peer failure is reported, not waited out.
// They spin for the first millisecond and sleep after it. WaitCommSettled
// queries only the communicator, so it is safe while a stream is captured;
// WaitStreamDone queries the stream, which would invalidate a capture.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace seam::comm::internal {

// OK once the communicator left ncclInProgress; DEADLINE_EXCEEDED if it has
// not by `deadline`; the asynchronous error otherwise.
absl::Status WaitCommSettled(ncclComm_t comm, absl::Time deadline);
// OK once every operation enqueued on `stream` finished (the communicator
// settled first); DEADLINE_EXCEEDED if not by `deadline`.
absl::Status WaitStreamDone(ncclComm_t comm, cudaStream_t stream, absl::Time deadline);

}  // namespace seam::comm::internal

// NcclCommunicator: collectives over NCCL for CUDA ranks (one GPU per rank).
// The NCCL unique id travels through a Store; calls are enqueued on the
// stream given in the options (or SetStream) and return without waiting for
// the GPU; Synchronize waits for the stream with a deadline.
// Only available when built with the CUDA path (SEAM_HAVE_NCCL).
//
// CUDA graphs: a call issued while its stream is being captured
// (cudaStreamIsCapturing) is captured, and replaying the graph performs it
// again on every rank (every rank must capture and replay alike, NCCL's
// rule). During a capture a call never waits for the GPU; it only polls the
// communicator on the host (ncclCommGetAsyncError, which does not touch the
// stream) until NCCL has enqueued the collective, as NCCL's non-blocking
// contract requires before anything else is issued on the stream. Issue
// each call once outside the capture first (warm-up), so that the scratch
// buffer (bf16/f16 reductions, reduce-scatter slices) is allocated: growing
// it during a capture fails with FAILED_PRECONDITION, nothing enqueued and
// the communicator intact. A call that returns ncclInProgress during a
// capture is enqueued on the capturing stream by NCCL's own thread (stream
// capture records work by stream, not by thread) and the call returns only
// once it is there.
// Outgrown scratch buffers are freed only with the communicator, so a graph
// stays valid. Synchronize during a capture fails with FAILED_PRECONDITION
// (there is nothing to wait for before the graph is launched; the
// communicator stays usable): synchronize after launching the graph.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "seam/comm/communicator.h"
#include "seam/comm/store.h"

namespace seam::comm {

struct NcclOptions {
  CommOptions comm;
  // CUDA ordinal of this rank's GPU; -1 uses the calling thread's current device.
  int device = -1;
  // cudaStream_t the collectives run on; nullptr is the legacy default stream.
  void* stream = nullptr;
};

class NcclCommunicator : public Communicator {
 public:
  // Later calls enqueue on `stream` (a cudaStream_t).
  virtual void SetStream(void* stream) = 0;
  virtual void* stream() const = 0;
};

#ifdef SEAM_HAVE_NCCL
// Rank 0 creates the unique id and Sets it under "nccl_unique_id"; the others
// Get it within options.comm.timeout. Initialisation itself is non-blocking
// and aborted at the same deadline (DEADLINE_EXCEEDED). Every call returns
// once its collective is enqueued (waiting at most options.comm.timeout for
// NCCL to enqueue it); Synchronize aborts the communicator at its deadline.
// Reductions of bf16/f16 are summed in fp32 and rounded once.
absl::StatusOr<std::unique_ptr<NcclCommunicator>> MakeNcclCommunicator(std::shared_ptr<Store> store,
                                                                       std::string group_name, int rank,
                                                                       int size, NcclOptions options);
#endif

}  // namespace seam::comm

// NcclCommunicator: collectives over NCCL for CUDA ranks (one GPU per rank).
// The NCCL unique id travels through a Store; calls are enqueued on the
// stream given in the options (or SetStream) and waited for with a deadline.
// Only available when built with the CUDA path (SEAM_HAVE_NCCL).
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
// only after its work finished on the stream, or aborts the communicator at
// the deadline. Reductions of bf16/f16 are summed in fp32 and rounded once.
absl::StatusOr<std::unique_ptr<NcclCommunicator>> MakeNcclCommunicator(std::shared_ptr<Store> store,
                                                                       std::string group_name, int rank,
                                                                       int size, NcclOptions options);
#endif

}  // namespace seam::comm

// IpcAllReduceFusion in a build without the CUDA path: Create refuses, so
// callers need no build-time switch of their own.
#include "absl/strings/str_cat.h"
#include "seam/comm/ipc_allreduce.h"

namespace seam::comm {

absl::StatusOr<std::unique_ptr<IpcAllReduceFusion>> IpcAllReduceFusion::Create(std::shared_ptr<Store>, int rank,
                                                                               int size, int, int64_t, int64_t,
                                                                               IpcAllReduceOptions) {
  return absl::FailedPreconditionError(
      absl::StrCat("ipc_allreduce rank ", rank, "/", size, ": this build has no CUDA path"));
}

}  // namespace seam::comm

// Polling waits on NCCL communicators and CUDA streams (see nccl_wait.h).
#include "nccl_wait.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nccl_check.h"
#include "seam/core/cuda_check.h"

namespace seam::comm::internal {
namespace {

// ncclSuccess / ncclInProgress as OK plus the flag; any other result as a Status.
absl::Status AsyncState(ncclComm_t comm, bool* in_progress) {
  ncclResult_t async = ncclSuccess;
  absl::Status s = SEAM_NCCL_STATUS(ncclCommGetAsyncError(comm, &async));
  if (!s.ok()) return s;
  *in_progress = async == ncclInProgress;
  if (async == ncclSuccess || async == ncclInProgress) return absl::OkStatus();
  return absl::Status(NcclCode(async), absl::StrCat("asynchronous NCCL error: ", ncclGetErrorString(async), " (",
                                                    ncclGetLastError(comm), ")"));
}

void Pause(int polls) {
  if (polls < 64) {
    std::this_thread::yield();
  } else {
    absl::SleepFor(absl::Microseconds(polls < 1024 ? 20 : 200));
  }
}

}  // namespace

absl::Status WaitCommSettled(ncclComm_t comm, absl::Time deadline) {
  for (int polls = 0;; ++polls) {
    bool in_progress = false;
    absl::Status s = AsyncState(comm, &in_progress);
    if (!s.ok() || !in_progress) return s;
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("the NCCL communicator is still in progress");
    Pause(polls);
  }
}

absl::Status WaitStreamDone(ncclComm_t comm, cudaStream_t stream, absl::Time deadline) {
  for (int polls = 0;; ++polls) {
    bool in_progress = false;
    absl::Status s = AsyncState(comm, &in_progress);
    if (!s.ok()) return s;
    if (!in_progress) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return SEAM_CUDA_STATUS(q);
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("the stream has not finished the collective");
    Pause(polls);
  }
}

}  // namespace seam::comm::internal

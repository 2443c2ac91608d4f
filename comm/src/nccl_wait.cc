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

// A collective of a decode step finishes within microseconds, so the first
// millisecond of a wait spins (a yield between polls); longer waits sleep.
void Pause(absl::Duration waited) {
  if (waited < absl::Milliseconds(1)) {
    std::this_thread::yield();
  } else {
    absl::SleepFor(waited < absl::Milliseconds(10) ? absl::Microseconds(50) : absl::Microseconds(200));
  }
}

}  // namespace

absl::Status WaitCommSettled(ncclComm_t comm, absl::Time deadline) {
  const absl::Time start = absl::Now();
  for (;;) {
    bool in_progress = false;
    absl::Status s = AsyncState(comm, &in_progress);
    if (!s.ok() || !in_progress) return s;
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("the NCCL communicator is still in progress");
    Pause(now - start);
  }
}

absl::Status WaitStreamDone(ncclComm_t comm, cudaStream_t stream, absl::Time deadline) {
  const absl::Time start = absl::Now();
  for (;;) {
    bool in_progress = false;
    absl::Status s = AsyncState(comm, &in_progress);
    if (!s.ok()) return s;
    if (!in_progress) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return SEAM_CUDA_STATUS(q);
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("the stream has not finished the enqueued work");
    Pause(now - start);
  }
}

}  // namespace seam::comm::internal

// A device link's lane: stream, kernel scratch, mapped result (device_lane.h).
#include "src/device_lane.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "seam/core/cuda_check.h"
#include "seam/core/status.h"

namespace seam::handoff::device {

DeviceScope::DeviceScope(int device) {
  status_ = SEAM_CUDA_STATUS(cudaGetDevice(&previous_));
  if (status_.ok() && previous_ != device) status_ = SEAM_CUDA_STATUS(cudaSetDevice(device));
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

absl::StatusOr<std::unique_ptr<DeviceLane>> DeviceLane::Create(int device) {
  DeviceScope scope(device);
  SEAM_RETURN_IF_ERROR(scope.status());
  std::unique_ptr<DeviceLane> lane(new DeviceLane(device));
  cudaStream_t stream = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  lane->stream_ = stream;
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&lane->partials_), kMaxCopyBlocks * sizeof(uint64_t)));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&lane->arrivals_), sizeof(unsigned int)));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemset(lane->arrivals_, 0, sizeof(unsigned int)));
  SEAM_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&lane->result_), sizeof(CopyChecksumResult),
                                          cudaHostAllocMapped | cudaHostAllocPortable));
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&lane->device_result_), lane->result_, 0));
  lane->result_->checksum = 0;
  lane->result_->expected = 0;
  lane->result_->ticket = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return lane;
}

DeviceLane::~DeviceLane() {
  DeviceScope scope(device_);
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  if (partials_ != nullptr) cudaFree(partials_);
  if (arrivals_ != nullptr) cudaFree(arrivals_);
  if (result_ != nullptr) cudaFreeHost(result_);
}

absl::Status DeviceLane::Launch(const CopySpan* spans, int count, uint64_t seed, void* wait_event, uint64_t* store,
                                const uint64_t* expected) {
  if (count > kMaxCopySpans) {
    return absl::InvalidArgumentError(absl::StrCat("lane on GPU ", device_, ": ", count, " spans, at most ",
                                                   kMaxCopySpans));
  }
  cudaStream_t stream = static_cast<cudaStream_t>(stream_);
  if (wait_event != nullptr) {
    SEAM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(wait_event), 0));
  }
  CopyChecksumParams p;
  for (int i = 0; i < count; ++i) p.spans[i] = spans[i];
  p.count = count;
  p.seed = seed;
  p.partials = partials_;
  p.arrivals = arrivals_;
  p.result = device_result_;
  p.ticket = ++ticket_;
  p.store = store;
  p.expected = expected;
  return LaunchCopyChecksum(p, stream_);
}

absl::Status DeviceLane::StreamError() const {
  const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
  if (e == cudaSuccess || e == cudaErrorNotReady) return absl::OkStatus();
  return Annotate(SEAM_CUDA_STATUS(e), absl::StrCat("copy + checksum on GPU ", device_));
}

absl::StatusOr<CopyChecksumResult> DeviceLane::Wait(absl::Time deadline) {
  for (uint64_t spins = 0;; ++spins) {
    // The kernel writes the checksum and expected word, fences system-wide, then the ticket.
    if (__atomic_load_n(&result_->ticket, __ATOMIC_ACQUIRE) == ticket_) {
      CopyChecksumResult r;
      r.checksum = __atomic_load_n(&result_->checksum, __ATOMIC_RELAXED);
      r.expected = __atomic_load_n(&result_->expected, __ATOMIC_RELAXED);
      r.ticket = ticket_;
      return r;
    }
    if (spins % 256 == 255) {
      // A fault in the kernel shows up here rather than as a missing ticket.
      SEAM_RETURN_IF_ERROR(StreamError());
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("copy + checksum on GPU ", device_, " did not finish by its deadline"));
      }
    }
  }
}

}  // namespace seam::handoff::device

// Owned CUDA streams, captured CUDA graphs and page-locked host buffers,
// behind opaque handles so that code above core needs no CUDA headers.
// Without the CUDA path every Create/Capture returns FAILED_PRECONDITION.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/core/device.h"

namespace seam {

// A non-blocking CUDA stream on one device, destroyed with the object.
class CudaStream {
 public:
  static absl::StatusOr<CudaStream> Create(Device device);
  CudaStream() = default;
  CudaStream(CudaStream&& o) noexcept;
  CudaStream& operator=(CudaStream&& o) noexcept;
  ~CudaStream();

  void* handle() const { return stream_; }  // cudaStream_t
  Device device() const { return device_; }
  // Waits for everything issued on the stream so far.
  absl::Status Synchronize() const;

 private:
  void* stream_ = nullptr;
  Device device_;
};

// Work issued on a stream, recorded once and replayed with one launch.
class CudaGraph {
 public:
  // Runs `work` with `stream` capturing (thread-local mode: this thread's
  // stream only) and instantiates what it issued. The work must not wait for
  // the host (no synchronous copies) and must free what it allocates.
  static absl::StatusOr<CudaGraph> Capture(const CudaStream& stream, const std::function<absl::Status()>& work);
  CudaGraph() = default;
  CudaGraph(CudaGraph&& o) noexcept;
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  ~CudaGraph();

  // Replays the graph on `stream` (asynchronous).
  absl::Status Launch(const CudaStream& stream) const;
  bool captured() const { return exec_ != nullptr; }

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

// Page-locked host memory, so uploads from it can be asynchronous.
class PinnedBuffer {
 public:
  static absl::StatusOr<PinnedBuffer> Create(size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  ~PinnedBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Copies `bytes` to `dst` on `device` from pinned host memory, ordered on
// `stream` and asynchronous: the source must stay untouched until the stream
// has passed the copy.
absl::Status UploadAsync(void* dst, Device device, const void* pinned_src, size_t bytes, const CudaStream& stream);
// Copies `bytes` from `src` on `device` into pinned host memory, ordered on
// `stream` and asynchronous: read the destination only once an event
// recorded after the copy has completed.
absl::Status DownloadAsync(void* pinned_dst, const void* src, Device device, size_t bytes, const CudaStream& stream);

// A point in a stream's work (timing off): recorded from any thread, waited
// for from any thread. Without the CUDA path Create fails.
class CudaEvent {
 public:
  static absl::StatusOr<CudaEvent> Create(Device device);
  CudaEvent() = default;
  CudaEvent(CudaEvent&& o) noexcept;
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  ~CudaEvent();

  // Marks the work issued on `stream` so far.
  absl::Status Record(const CudaStream& stream);
  // Waits until the marked work is done (at once when never recorded);
  // DEADLINE_EXCEEDED once `deadline` passes first. Polls, yielding the CPU.
  absl::Status Wait(absl::Time deadline) const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
  Device device_;
};

// Work issued on `waiter` (a cudaStream_t; nullptr the legacy stream) from
// now on waits for everything issued on `waited` so far (an event recorded
// on one, waited for by the other); the host does not wait. A no-op when both
// are the same stream. Joins and forks the streams of a two-batch overlap.
absl::Status StreamWaitStream(void* waiter, void* waited);

}  // namespace seam

#include "seam/core/cuda_graph.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

#ifdef SEAM_HAVE_CUDA
#include "seam/core/cuda_check.h"
#endif

namespace seam {

CudaStream::CudaStream(CudaStream&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)), device_(o.device_) {}
CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  std::swap(stream_, o.stream_);
  std::swap(device_, o.device_);
  return *this;
}
CudaGraph::CudaGraph(CudaGraph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  std::swap(graph_, o.graph_);
  std::swap(exec_, o.exec_);
  return *this;
}
CudaEvent::CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)), device_(o.device_) {}
CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  std::swap(event_, o.event_);
  std::swap(device_, o.device_);
  return *this;
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  std::swap(data_, o.data_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

#ifdef SEAM_HAVE_CUDA

absl::StatusOr<CudaStream> CudaStream::Create(Device device) {
  if (!device.is_cuda()) return absl::InvalidArgumentError(absl::StrCat("CudaStream on ", device.ToString()));
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  CudaStream s;
  cudaStream_t stream = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  s.stream_ = stream;
  s.device_ = device;
  return s;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

absl::Status CudaStream::Synchronize() const {
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
  return absl::OkStatus();
}

absl::StatusOr<CudaGraph> CudaGraph::Capture(const CudaStream& stream, const std::function<absl::Status()>& work) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.handle());
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const absl::Status worked = work();
  cudaGraph_t graph = nullptr;
  const absl::Status ended = SEAM_CUDA_STATUS(cudaStreamEndCapture(s, &graph));
  if (!worked.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return worked;
  }
  SEAM_RETURN_IF_ERROR(ended);
  CudaGraph g;
  g.graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph, 0));
  g.exec_ = exec;
  return g;
}

CudaGraph::~CudaGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

absl::Status CudaGraph::Launch(const CudaStream& stream) const {
  if (exec_ == nullptr) return absl::FailedPreconditionError("CudaGraph::Launch: nothing captured");
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream.handle())));
  return absl::OkStatus();
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Create(size_t bytes) {
  PinnedBuffer b;
  SEAM_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&b.data_, bytes, cudaHostAllocDefault));
  b.bytes_ = bytes;
  return b;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

namespace {

// One copy between pinned host memory and `device`, enqueued on `stream`.
absl::Status CopyOnStream(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, Device device,
                          const CudaStream& stream) {
  if (bytes == 0) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, static_cast<cudaStream_t>(stream.handle())));
  return absl::OkStatus();
}

}  // namespace

absl::Status UploadAsync(void* dst, Device device, const void* pinned_src, size_t bytes, const CudaStream& stream) {
  return CopyOnStream(dst, pinned_src, bytes, cudaMemcpyHostToDevice, device, stream);
}

absl::Status DownloadAsync(void* pinned_dst, const void* src, Device device, size_t bytes, const CudaStream& stream) {
  return CopyOnStream(pinned_dst, src, bytes, cudaMemcpyDeviceToHost, device, stream);
}

absl::StatusOr<CudaEvent> CudaEvent::Create(Device device) {
  if (!device.is_cuda()) return absl::InvalidArgumentError(absl::StrCat("CudaEvent on ", device.ToString()));
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  CudaEvent e;
  cudaEvent_t event = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  e.event_ = event;
  e.device_ = device;
  return e;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

absl::Status CudaEvent::Record(const CudaStream& stream) {
  if (event_ == nullptr) return absl::FailedPreconditionError("CudaEvent::Record: no event");
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream.handle())));
  return absl::OkStatus();
}

absl::Status CudaEvent::Wait(absl::Time deadline) const {
  if (event_ == nullptr) return absl::OkStatus();
  for (int polls = 0;; ++polls) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) return SEAM_CUDA_STATUS(e);
    // Spin briefly (a decode step's tokens are usually close), then yield.
    if (polls > 64 && absl::Now() > deadline) {
      return absl::DeadlineExceededError("the device did not reach the awaited point in time");
    }
    if (polls > 1024) std::this_thread::yield();
  }
}

absl::Status StreamWaitStream(void* waiter, void* waited) {
  if (waiter == waited) return absl::OkStatus();
  cudaEvent_t event = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord(event, static_cast<cudaStream_t>(waited));
  if (e == cudaSuccess) e = cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), event, 0);
  cudaEventDestroy(event);  // released once the wait has passed it
  SEAM_CUDA_RETURN_IF_ERROR(e);
  return absl::OkStatus();
}

#else  // !SEAM_HAVE_CUDA

namespace {
absl::Status NoCuda(const char* what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": this build has no CUDA path (SEAM_CUDA=OFF)"));
}
}  // namespace

absl::StatusOr<CudaStream> CudaStream::Create(Device) { return NoCuda("CudaStream"); }
CudaStream::~CudaStream() = default;
absl::Status CudaStream::Synchronize() const { return NoCuda("CudaStream"); }
absl::StatusOr<CudaGraph> CudaGraph::Capture(const CudaStream&, const std::function<absl::Status()>&) {
  return NoCuda("CudaGraph");
}
CudaGraph::~CudaGraph() = default;
absl::Status CudaGraph::Launch(const CudaStream&) const { return NoCuda("CudaGraph"); }
absl::StatusOr<PinnedBuffer> PinnedBuffer::Create(size_t) { return NoCuda("PinnedBuffer"); }
PinnedBuffer::~PinnedBuffer() = default;
absl::Status UploadAsync(void*, Device, const void*, size_t, const CudaStream&) { return NoCuda("UploadAsync"); }
absl::Status DownloadAsync(void*, const void*, Device, size_t, const CudaStream&) { return NoCuda("DownloadAsync"); }
absl::StatusOr<CudaEvent> CudaEvent::Create(Device) { return NoCuda("CudaEvent"); }
CudaEvent::~CudaEvent() = default;
absl::Status CudaEvent::Record(const CudaStream&) { return NoCuda("CudaEvent"); }
absl::Status CudaEvent::Wait(absl::Time) const { return absl::OkStatus(); }
absl::Status StreamWaitStream(void*, void*) { return NoCuda("StreamWaitStream"); }

#endif

}  // namespace seam

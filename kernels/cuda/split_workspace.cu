// SplitWorkspaceFor: a registry of per-(device, stream) workspaces that lives
// until the process exits (see split_workspace.cuh).
#include "split_workspace.cuh"

#include <map>
#include <mutex>
#include <utility>

namespace seam::kernels::cuda::attn {
namespace {

struct Registry {
  std::mutex mu;
  // nullptr records a failed allocation, so it is not retried on every call.
  std::map<std::pair<int, cudaStream_t>, const SplitWorkspace*> by_stream;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: graphs may outlive static destructors
  return *registry;
}

// Allocates and zeroes a workspace on `stream`; nullptr (and the CUDA error
// cleared) when the device has no room.
const SplitWorkspace* Allocate(cudaStream_t stream) {
  void* memory = nullptr;
  const size_t bytes = kSplitPartialFloats * sizeof(float) + kSplitCounters * sizeof(int);
  if (cudaMalloc(&memory, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  auto* ws = new SplitWorkspace{static_cast<float*>(memory),
                                reinterpret_cast<int*>(static_cast<float*>(memory) + kSplitPartialFloats)};
  if (cudaMemsetAsync(ws->counters, 0, kSplitCounters * sizeof(int), stream) != cudaSuccess) {
    cudaGetLastError();
    cudaFree(memory);
    delete ws;
    return nullptr;
  }
  return ws;
}

}  // namespace

const SplitWorkspace* SplitWorkspaceFor(cudaStream_t stream) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  const auto key = std::make_pair(device, stream);
  auto it = registry.by_stream.find(key);
  if (it != registry.by_stream.end()) return it->second;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // e.g. the legacy stream while another stream captures: try again later
  }
  if (capture != cudaStreamCaptureStatusNone) return nullptr;  // no allocation inside a capture
  const SplitWorkspace* ws = Allocate(stream);
  registry.by_stream.emplace(key, ws);
  return ws;
}

}  // namespace seam::kernels::cuda::attn

// SplitWorkspaceFor: a registry of per-(device, stream) workspaces that lives
// until the process exits (see split_workspace.cuh).
#include "split_workspace.cuh"

#include <algorithm>
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

int64_t ChooseSplits(int64_t units, int64_t steps, int64_t min_steps, int64_t slots, int64_t partial_floats,
                     int64_t max_splits) {
  if (units <= 0 || units > kSplitCounters || slots <= 0) return 1;
  int64_t cap = std::min<int64_t>(max_splits, (steps + min_steps - 1) / std::max<int64_t>(min_steps, 1));
  cap = std::min<int64_t>(cap, static_cast<int64_t>(kSplitPartialFloats) / (units * std::max<int64_t>(partial_floats, 1)));
  const double overhead = static_cast<double>(kSplitOverheadSteps) / std::max<int64_t>(steps, 1);
  int64_t best = 1;
  double best_cost = 0;
  for (int64_t s = 1; s <= std::max<int64_t>(cap, 1); ++s) {
    const double waves = static_cast<double>((units * s + slots - 1) / slots);
    const double cost = waves * (1.0 / static_cast<double>(s) + overhead);
    if (s == 1 || cost < best_cost * (1 - 1e-6)) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace seam::kernels::cuda::attn

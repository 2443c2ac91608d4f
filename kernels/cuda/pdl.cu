// The host side of programmatic dependent launch (pdl.cuh).
#include <cstdlib>
#include <cstring>

#include <atomic>

#include "pdl.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

bool DisabledByEnvironment() {
  static const bool disabled = [] {
    const char* v = std::getenv("SEAM_PDL");
    return v != nullptr && std::strcmp(v, "0") == 0;
  }();
  return disabled;
}

}  // namespace

bool DependentLaunchEnabled() {
  // 0: not yet known, 1: enabled, 2: disabled.
  static std::atomic<int> state[kMaxDevices];
  if (DisabledByEnvironment()) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  int known = state[device].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    known = major >= 9 ? 1 : 2;
    state[device].store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

}  // namespace seam::kernels::cuda

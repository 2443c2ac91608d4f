// Programmatic dependent launch (PDL) for the kernels of kernels/cuda
// (internal): the launcher that enrolls a kernel and the two device-side
// calls an enrolled kernel makes. The switch is seam/kernels/programmatic_launch.h.
//
// Semantics (CUDA programming guide, "Programmatic Dependent Launch"; PTX
// griddepcontrol): a kernel launched with the programmatic-stream-
// serialization attribute may be scheduled as soon as every block of the
// kernel before it on the stream has executed griddepcontrol.launch_dependents
// (PdlLaunchDependents) or exited. griddepcontrol.wait (PdlWait) blocks the
// calling thread until that preceding grid has completed and all its memory
// operations are visible. So launch_dependents only lets the next kernel's
// blocks be scheduled early; it never publishes data, and it may be issued
// anywhere (kernels here issue it right after their own PdlWait: at most two
// grids of a chain are resident at once). Both are no-ops in a kernel not
// launched with the attribute, and compile to nothing below sm_90.
//
// The rules every enrolled kernel follows (they keep a chain of enrolled
// kernels as ordered as plain launches):
// 1. PdlWait() before the first global read of anything a preceding kernel
//    wrote, and before the first global write of any kind (a predecessor may
//    still be reading the buffer). Only data no kernel of the step writes
//    (weights, norms' gains, tables) may be read before it.
// 2. Every block executes PdlWait() before it exits, including blocks that
//    exit early with no work. A wait covers only the immediately preceding
//    grid; ordering is transitive only because no enrolled grid can complete
//    before its own predecessor has.
// Kernels not enrolled (cuBLASLt's, memcpy and memset nodes, launches with
// <<<>>>) are full barriers as before: an enrolled kernel after one of them
// starts early only if that kernel itself triggers, and still waits for its
// completion.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <utility>

#include "cuda_common.cuh"
#include "seam/kernels/programmatic_launch.h"

namespace seam::kernels::cuda {

// Waits until the preceding grid on the stream has completed and its writes are visible.
__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next enrolled kernel on the stream be scheduled once every block of this grid has called it (or exited).
__device__ __forceinline__ void PdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches on the calling thread's current device use PDL: the
// switch is on and the device's compute capability is at least 9.0 (queried
// once per device, then cached).
inline absl::Status PdlOnCurrentDevice(bool& on) {
  on = false;
  if (!ProgrammaticLaunch()) return absl::OkStatus();
  int device = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  constexpr int kCachedDevices = 64;
  static std::atomic<int> major_of[kCachedDevices] = {};  // 0: not yet queried
  int major = device >= 0 && device < kCachedDevices ? major_of[device].load(std::memory_order_relaxed) : 0;
  if (major == 0) {
    SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (device >= 0 && device < kCachedDevices) major_of[device].store(major, std::memory_order_relaxed);
  }
  on = major >= 9;
  return absl::OkStatus();
}

// How an enrolled kernel is launched; cluster (1, 1, 1) means no cluster.
struct LaunchShape {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  dim3 cluster = dim3(1, 1, 1);
};

// Launches kernel(args...) through cudaLaunchKernelEx: with the
// programmatic-stream-serialization attribute where PdlOnCurrentDevice, as a
// plain launch otherwise; a launch error becomes a Status naming the call.
// The kernel must follow the rules above.
template <typename... Params, typename... Args>
absl::Status LaunchEnrolled(const LaunchShape& shape, void (*kernel)(Params...), Args&&... args) {
  bool pdl = false;
  SEAM_RETURN_IF_ERROR(PdlOnCurrentDevice(pdl));
  cudaLaunchAttribute attrs[2] = {};
  unsigned int count = 0;
  if (shape.cluster.x * shape.cluster.y * shape.cluster.z > 1) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count].val.clusterDim.x = shape.cluster.x;
    attrs[count].val.clusterDim.y = shape.cluster.y;
    attrs[count].val.clusterDim.z = shape.cluster.z;
    ++count;
  }
  if (pdl) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = shape.grid;
  config.blockDim = shape.block;
  config.dynamicSmemBytes = shape.shared_bytes;
  config.stream = shape.stream;
  config.attrs = attrs;
  config.numAttrs = count;
  SEAM_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  return absl::OkStatus();
}

}  // namespace seam::kernels::cuda

// Programmatic dependent launch (PDL, compute capability 9.0 and later):
// a kernel launched with LaunchDependent may start while the kernel before
// it on the stream is still running, if that kernel allows it (it calls
// AllowDependents, or has exited). Internal to kernels/cuda.
//
// Contract for a kernel launched with LaunchDependent: before WaitForPrior
// returns it may only read memory no earlier kernel of the stream writes
// (weights), and it must not write global memory at all; WaitForPrior
// returns once every earlier kernel of the stream has completed and its
// writes are visible. AllowDependents only affects scheduling, never
// correctness: any kernel may call it anywhere (a no-op when the next
// kernel was launched plainly). On older GPUs, and with SEAM_PDL=0 in the
// environment (for A/B measurements), LaunchDependent launches plainly and
// both device calls do nothing. Kernels launched this way inside a stream
// capture become programmatic edges of the CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace seam::kernels::cuda {

// Waits for the kernels before this one on the stream (see the contract).
__device__ __forceinline__ void WaitForPrior() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel of the stream, if launched with LaunchDependent, start.
__device__ __forceinline__ void AllowDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// True when launches on the current device may overlap their predecessor:
// compute capability ≥ 9.0 and SEAM_PDL is not "0". Cached per device.
bool DependentLaunchEnabled();

// Launches `kernel` on `stream`, allowed to overlap the previous kernel of
// the stream when DependentLaunchEnabled(); the kernel must follow the contract above.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = DependentLaunchEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace seam::kernels::cuda

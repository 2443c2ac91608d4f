// The calling thread's current CUDA stream: the one core's device memory uses,
// so kernels, allocations and copies of a thread are ordered on one stream.
#include "seam/kernels/stream.h"

#include "seam/core/device_memory.h"
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
#include "cuda/cuda_ops.h"
#endif

namespace seam::kernels {

StreamHandle CurrentStream() { return CurrentCudaStream(); }
void SetCurrentStream(StreamHandle stream) { SetCurrentCudaStream(stream); }

absl::Status UseOwnMatmulWorkspace(StreamHandle stream) {
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
  return cuda::UseOwnMatmulWorkspace(stream);
#else
  return absl::OkStatus();
#endif
}

}  // namespace seam::kernels

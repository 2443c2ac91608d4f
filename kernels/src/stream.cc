// The calling thread's current CUDA stream: the one core's device memory uses,
// so kernels, allocations and copies of a thread are ordered on one stream.
#include "seam/kernels/stream.h"

#include "seam/core/device_memory.h"

namespace seam::kernels {

StreamHandle CurrentStream() { return CurrentCudaStream(); }
void SetCurrentStream(StreamHandle stream) { SetCurrentCudaStream(stream); }

}  // namespace seam::kernels

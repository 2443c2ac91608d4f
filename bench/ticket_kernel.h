// The smallest GPU work whose end a host thread sees by watching memory: a
// one-thread kernel that fences system-wide and then writes a ticket into
// mapped host memory, as a device link's copy + checksum kernel ends
// (stage_server/handoff/src/device_copy_checksum.cu). The floors of
// seam-bench-handoff device (device_pingpong.h) launch it. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace seam::bench {

// Enqueues the kernel on `stream`; `ticket` is the device pointer of mapped
// host memory (cudaHostGetDevicePointer). Returns the launch's error.
cudaError_t LaunchTicketWrite(uint64_t* ticket, uint64_t value, cudaStream_t stream);

}  // namespace seam::bench

// The ticket kernel of the device mode's floors (see ticket_kernel.h).
#include "ticket_kernel.h"

#include <cuda_runtime.h>

namespace seam::bench {
namespace {

__global__ void TicketWriteKernel(volatile uint64_t* ticket, uint64_t value) {
  __threadfence_system();
  *ticket = value;
}

}  // namespace

cudaError_t LaunchTicketWrite(uint64_t* ticket, uint64_t value, cudaStream_t stream) {
  TicketWriteKernel<<<1, 1, 0, stream>>>(ticket, value);
  return cudaGetLastError();
}

}  // namespace seam::bench

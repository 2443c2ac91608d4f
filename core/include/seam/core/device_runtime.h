// DeviceRuntime: what core's device memory functions (device_memory.h) and
// its page-locked host staging ask of a device runtime, so that core itself
// links no device library. The CUDA one lives in seam_core_cuda (core/cuda)
// and installs itself when a binary links it; a binary without it (the
// coordinator) gets the host-only runtime: no GPU is visible, every CUDA
// device is FAILED_PRECONDITION, page-locked requests get plain memory.
// A runtime is installed once, at start-up, before any device is used; its
// methods are thread-safe. The stream arguments are the calling thread's
// current stream (CurrentCudaStream, opaque: a cudaStream_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/device.h"

namespace seam {

struct DeviceMemoryInfo;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual int DeviceCount() const = 0;
  virtual absl::Status UseDevice(Device device) const = 0;
  virtual absl::Status SynchronizeStream(Device device, void* stream) const = 0;
  virtual absl::StatusOr<DeviceMemoryInfo> QueryMemory(Device device) const = 0;
  virtual absl::StatusOr<int64_t> PoolReservedBytes(Device device) const = 0;
  virtual absl::Status Malloc(Device device, size_t bytes, void* stream, void** out) const = 0;
  virtual void Free(Device device, void* ptr, void* stream) const = 0;
  virtual absl::Status Memset(Device device, void* ptr, int value, size_t bytes, void* stream) const = 0;
  // Copies between any two devices, one of them not the host (device_memory.h's DeviceCopy).
  virtual absl::Status Copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                            void* stream) const = 0;
  virtual absl::Status CopyRows(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                                Device src_device, size_t row_bytes, size_t rows, void* stream) const = 0;
  // Page-locked host memory: null when it cannot give any (the caller falls
  // back to plain memory); Release frees what HostAllocPinned gave and
  // returns false for memory it did not give.
  virtual void* HostAllocPinned(size_t bytes) const = 0;
  virtual bool HostFreePinned(void* ptr) const = 0;
};

// The runtime in force: the installed one, else the host-only one.
const DeviceRuntime& CurrentDeviceRuntime();
// Installs `runtime` (static storage; never uninstalled). For seam_core_cuda.
void InstallDeviceRuntime(const DeviceRuntime* runtime);

}  // namespace seam

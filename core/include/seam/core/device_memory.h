// Device memory primitives behind Storage and CopyInto. They go through the
// DeviceRuntime in force (device_runtime.h): the CUDA one in a binary that
// links seam_core_cuda; in one that does not (or a build without the CUDA
// path) no GPU is visible and any CUDA device is an error.
//
// CUDA memory is stream-ordered: DeviceMalloc/DeviceFree use the device's
// memory pool on the calling thread's current stream (cudaMallocAsync /
// cudaFreeAsync; the pool keeps freed memory cached, so a steady decode loop
// never returns to the driver), and copies and memsets run on that stream.
// An allocation made while the stream is being captured becomes part of the
// CUDA graph. A copy that touches host memory waits for the stream; a
// device-to-device copy does not.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/device.h"

namespace seam {

// True when this binary was built with CUDA and at least one GPU is visible.
bool CudaAvailable();
// Number of visible GPUs (0 without the CUDA path or without a GPU).
int CudaDeviceCount();

// The calling thread's current CUDA stream (an opaque cudaStream_t; nullptr
// is the legacy default stream). Thread-local: each rank thread sets its own.
void* CurrentCudaStream();
void SetCurrentCudaStream(void* stream);

// Makes `device` the calling thread's current CUDA device (kernels launch
// there); a no-op for the host. FAILED_PRECONDITION without the CUDA path.
absl::Status UseDevice(Device device);
// Waits until the calling thread's current stream on `device` has finished
// its work; a no-op for the host.
absl::Status SynchronizeStream(Device device);

// A GPU's memory as the driver reports it (cudaMemGetInfo): bytes free and in
// all. Memory the stream-ordered pool keeps for reuse counts as in use.
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(Device device);
// Bytes this process's stream-ordered pool on `device` holds from the
// driver (what DeviceMalloc drew, kept or in use); other processes on the
// same GPU never count here, as they do in QueryDeviceMemory. 0 off CUDA.
absl::StatusOr<int64_t> DevicePoolReservedBytes(Device device);

absl::Status DeviceMalloc(Device device, size_t bytes, void** out);
void DeviceFree(Device device, void* ptr);
absl::Status DeviceMemset(Device device, void* ptr, int value, size_t bytes);
// Copies bytes between any two devices (host, CUDA). Synchronous when the
// host is involved; a device-to-device copy is ordered on the current stream.
absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// `rows` runs of `row_bytes` bytes, the runs `src_pitch` / `dst_pitch` bytes
// apart (a column block of a row-major matrix); ordering as DeviceCopy.
absl::Status DeviceCopyRows(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                            Device src_device, size_t row_bytes, size_t rows);

}  // namespace seam

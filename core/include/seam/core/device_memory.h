// Device memory primitives behind Storage and CopyInto. With the CUDA path
// built they call the CUDA runtime; without it any CUDA device is an error.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "seam/core/device.h"

namespace seam {

// True when this binary was built with CUDA and at least one GPU is visible.
bool CudaAvailable();
// Number of visible GPUs (0 without the CUDA path or without a GPU).
int CudaDeviceCount();

absl::Status DeviceMalloc(Device device, size_t bytes, void** out);
void DeviceFree(Device device, void* ptr);
absl::Status DeviceMemset(Device device, void* ptr, int value, size_t bytes);
// Copies bytes between any two devices (host, CUDA); synchronous.
absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace seam

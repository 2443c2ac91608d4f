#include "seam/core/device_memory.h"

#include <cstring>

#include "absl/strings/str_cat.h"

#ifdef SEAM_HAVE_CUDA
#include "seam/core/cuda_check.h"
#endif

namespace seam {

#ifdef SEAM_HAVE_CUDA

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool CudaAvailable() { return CudaDeviceCount() > 0; }

absl::Status DeviceMalloc(Device device, size_t bytes, void** out) {
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  *out = nullptr;
  if (bytes == 0) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(out, bytes));
  return absl::OkStatus();
}

void DeviceFree(Device device, void* ptr) {
  if (ptr == nullptr) return;
  cudaSetDevice(device.index);
  cudaFree(ptr);
}

absl::Status DeviceMemset(Device device, void* ptr, int value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemset(ptr, value, bytes));
  return absl::OkStatus();
}

absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  const int dev = dst_device.is_cuda() ? dst_device.index : src_device.index;
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  return absl::OkStatus();
}

#else  // !SEAM_HAVE_CUDA

namespace {
absl::Status NoCuda(Device device) {
  return absl::FailedPreconditionError(
      absl::StrCat("device ", device.ToString(), " requested but this build has no CUDA path (SEAM_CUDA=OFF)"));
}
}  // namespace

int CudaDeviceCount() { return 0; }
bool CudaAvailable() { return false; }
absl::Status DeviceMalloc(Device device, size_t, void**) { return NoCuda(device); }
void DeviceFree(Device, void*) {}
absl::Status DeviceMemset(Device device, void*, int, size_t) { return NoCuda(device); }
absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  return NoCuda(dst_device.is_cuda() ? dst_device : src_device);
}

#endif

}  // namespace seam

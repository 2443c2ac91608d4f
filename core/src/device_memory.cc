#include "seam/core/device_memory.h"

#include <cstring>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

#ifdef SEAM_HAVE_CUDA
#include "seam/core/cuda_check.h"
#endif

namespace seam {

namespace {
thread_local void* current_cuda_stream = nullptr;
}  // namespace

void* CurrentCudaStream() { return current_cuda_stream; }
void SetCurrentCudaStream(void* stream) { current_cuda_stream = stream; }

#ifdef SEAM_HAVE_CUDA

namespace {

cudaStream_t Stream() { return static_cast<cudaStream_t>(current_cuda_stream); }

// Keep freed blocks in the device's default pool instead of returning them to
// the driver at every synchronisation (the pool's default threshold is 0).
absl::Status CachePoolOnce(int device) {
  // Every allocation passes here: a thread that has seen the device set up
  // skips the lock.
  thread_local std::set<int> seen;
  if (seen.count(device) != 0) return absl::OkStatus();
  static std::mutex mu;
  static std::set<int> done;
  std::lock_guard<std::mutex> lock(mu);
  if (done.count(device) != 0) {
    seen.insert(device);
    return absl::OkStatus();
  }
  cudaMemPool_t pool;
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t threshold = UINT64_MAX;
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  // Pool memory is not covered by cudaDeviceEnablePeerAccess: let every peer
  // GPU that can reach this one map it, as NCCL's intra-process P2P does with
  // the buffers it is given.
  int count = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int peer = 0; peer < count; ++peer) {
    int can = 0;
    if (peer == device || cudaDeviceCanAccessPeer(&can, peer, device) != cudaSuccess || !can) continue;
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAccess(pool, &access, 1));
  }
  done.insert(device);
  seen.insert(device);
  return absl::OkStatus();
}

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool CudaAvailable() { return CudaDeviceCount() > 0; }

absl::Status UseDevice(Device device) {
  if (device.is_cpu()) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  return absl::OkStatus();
}

absl::Status SynchronizeStream(Device device) {
  if (device.is_cpu()) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(Stream()));
  return absl::OkStatus();
}

absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(Device device) {
  if (!device.is_cuda()) return absl::InvalidArgumentError("device memory is queried for GPUs only");
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  size_t free_bytes = 0, total_bytes = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemoryInfo{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

absl::StatusOr<int64_t> DevicePoolReservedBytes(Device device) {
  if (!device.is_cuda()) return int64_t{0};
  cudaMemPool_t pool;
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device.index));
  uint64_t reserved = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  return static_cast<int64_t>(reserved);
}

absl::Status DeviceMalloc(Device device, size_t bytes, void** out) {
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  *out = nullptr;
  if (bytes == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CachePoolOnce(device.index));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMallocAsync(out, bytes, Stream()));
  return absl::OkStatus();
}

void DeviceFree(Device device, void* ptr) {
  if (ptr == nullptr) return;
  cudaSetDevice(device.index);
  cudaFreeAsync(ptr, Stream());
}

absl::Status DeviceMemset(Device device, void* ptr, int value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ptr, value, bytes, Stream()));
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
  SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, Stream()));
  if (dst_device.is_cpu() || src_device.is_cpu()) SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(Stream()));
  return absl::OkStatus();
}

absl::Status DeviceCopyRows(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                            Device src_device, size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return absl::OkStatus();
  const int dev = dst_device.is_cuda() ? dst_device.index : src_device.index;
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev));
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault, Stream()));
  if (dst_device.is_cpu() || src_device.is_cpu()) SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(Stream()));
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
absl::Status UseDevice(Device device) { return device.is_cpu() ? absl::OkStatus() : NoCuda(device); }
absl::Status SynchronizeStream(Device device) { return device.is_cpu() ? absl::OkStatus() : NoCuda(device); }
absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(Device device) { return NoCuda(device); }
absl::Status DeviceMalloc(Device device, size_t, void**) { return NoCuda(device); }
absl::StatusOr<int64_t> DevicePoolReservedBytes(Device) { return int64_t{0}; }
void DeviceFree(Device, void*) {}
absl::Status DeviceMemset(Device device, void*, int, size_t) { return NoCuda(device); }
absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  return NoCuda(dst_device.is_cuda() ? dst_device : src_device);
}
absl::Status DeviceCopyRows(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                            Device src_device, size_t row_bytes, size_t rows) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    for (size_t r = 0; r < rows; ++r) {
      std::memmove(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
    }
    return absl::OkStatus();
  }
  return NoCuda(dst_device.is_cuda() ? dst_device : src_device);
}

#endif

}  // namespace seam

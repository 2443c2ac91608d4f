// The CUDA DeviceRuntime (device_runtime.h), installed when a binary links
// seam_core_cuda: its link options keep this file's anchor, so the installer
// below runs at start-up. Memory is stream-ordered (device_memory.h): the
// device's default pool on the calling thread's current stream.
#include <mutex>
#include <set>

#include "seam/core/cuda_check.h"
#include "seam/core/device_memory.h"
#include "seam/core/device_runtime.h"
#include "seam/core/status.h"

// Referenced by the link options of seam_core_cuda (--undefined), so that
// this object file, and with it the installer, is always linked.
extern "C" {
int seam_cuda_device_runtime_anchor = 0;
}

namespace seam {
namespace {

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

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

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  int DeviceCount() const override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }

  absl::Status UseDevice(Device device) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
    return absl::OkStatus();
  }

  absl::Status SynchronizeStream(Device device, void* stream) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
    SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }

  absl::StatusOr<DeviceMemoryInfo> QueryMemory(Device device) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
    size_t free_bytes = 0, total_bytes = 0;
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    return DeviceMemoryInfo{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
  }

  absl::StatusOr<int64_t> PoolReservedBytes(Device device) const override {
    cudaMemPool_t pool;
    SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device.index));
    uint64_t reserved = 0;
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    return static_cast<int64_t>(reserved);
  }

  absl::Status Malloc(Device device, size_t bytes, void* stream, void** out) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
    *out = nullptr;
    if (bytes == 0) return absl::OkStatus();
    SEAM_RETURN_IF_ERROR(CachePoolOnce(device.index));
    SEAM_CUDA_RETURN_IF_ERROR(cudaMallocAsync(out, bytes, AsStream(stream)));
    return absl::OkStatus();
  }

  void Free(Device device, void* ptr, void* stream) const override {
    cudaSetDevice(device.index);
    cudaFreeAsync(ptr, AsStream(stream));
  }

  absl::Status Memset(Device device, void* ptr, int value, size_t bytes, void* stream) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.index));
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ptr, value, bytes, AsStream(stream)));
    return absl::OkStatus();
  }

  // A copy that touches the host waits for the stream; a device-to-device one does not.
  absl::Status Copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                    void* stream) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(dst_device.is_cuda() ? dst_device.index : src_device.index));
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, AsStream(stream)));
    if (dst_device.is_cpu() || src_device.is_cpu()) SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }

  absl::Status CopyRows(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                        Device src_device, size_t row_bytes, size_t rows, void* stream) const override {
    SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(dst_device.is_cuda() ? dst_device.index : src_device.index));
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDefault,
                                                AsStream(stream)));
    if (dst_device.is_cpu() || src_device.is_cpu()) SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }

  void* HostAllocPinned(size_t bytes) const override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess) return p;
    cudaGetLastError();
    return nullptr;
  }

  bool HostFreePinned(void* ptr) const override {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, ptr) == cudaSuccess && attributes.type == cudaMemoryTypeHost) {
      cudaFreeHost(ptr);
      return true;
    }
    cudaGetLastError();
    return false;
  }
};

const CudaDeviceRuntime cuda_runtime{};
[[maybe_unused]] const bool installed = (InstallDeviceRuntime(&cuda_runtime), true);

}  // namespace
}  // namespace seam

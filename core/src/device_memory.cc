// Device memory (device_memory.h) through the DeviceRuntime in force
// (device_runtime.h): the host-only one here, the CUDA one when a binary
// links seam_core_cuda. Host-to-host work never reaches a runtime.
#include "seam/core/device_memory.h"

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "seam/core/device_runtime.h"

namespace seam {
namespace {

thread_local void* current_cuda_stream = nullptr;

absl::Status NoCuda(Device device) {
  return absl::FailedPreconditionError(absl::StrCat(
      "device ", device.ToString(), " requested but this binary has no CUDA path (seam_core_cuda is not linked, "
      "or the build has SEAM_CUDA=OFF)"));
}

// No GPU: every CUDA device is an error; page-locked memory is plain memory.
class HostOnlyRuntime final : public DeviceRuntime {
 public:
  constexpr HostOnlyRuntime() = default;
  int DeviceCount() const override { return 0; }
  absl::Status UseDevice(Device device) const override { return NoCuda(device); }
  absl::Status SynchronizeStream(Device device, void*) const override { return NoCuda(device); }
  absl::StatusOr<DeviceMemoryInfo> QueryMemory(Device device) const override { return NoCuda(device); }
  absl::StatusOr<int64_t> PoolReservedBytes(Device) const override { return int64_t{0}; }
  absl::Status Malloc(Device device, size_t, void*, void**) const override { return NoCuda(device); }
  void Free(Device, void*, void*) const override {}
  absl::Status Memset(Device device, void*, int, size_t, void*) const override { return NoCuda(device); }
  absl::Status Copy(void*, Device dst_device, const void*, Device src_device, size_t, void*) const override {
    return NoCuda(dst_device.is_cuda() ? dst_device : src_device);
  }
  absl::Status CopyRows(void*, size_t, Device dst_device, const void*, size_t, Device src_device, size_t, size_t,
                        void*) const override {
    return NoCuda(dst_device.is_cuda() ? dst_device : src_device);
  }
  void* HostAllocPinned(size_t) const override { return nullptr; }
  bool HostFreePinned(void*) const override { return false; }
};

const HostOnlyRuntime host_only{};
std::atomic<const DeviceRuntime*> installed{&host_only};

}  // namespace

const DeviceRuntime& CurrentDeviceRuntime() { return *installed.load(std::memory_order_acquire); }
void InstallDeviceRuntime(const DeviceRuntime* runtime) { installed.store(runtime, std::memory_order_release); }

void* CurrentCudaStream() { return current_cuda_stream; }
void SetCurrentCudaStream(void* stream) { current_cuda_stream = stream; }

int CudaDeviceCount() { return CurrentDeviceRuntime().DeviceCount(); }
bool CudaAvailable() { return CudaDeviceCount() > 0; }

absl::Status UseDevice(Device device) {
  return device.is_cpu() ? absl::OkStatus() : CurrentDeviceRuntime().UseDevice(device);
}

absl::Status SynchronizeStream(Device device) {
  return device.is_cpu() ? absl::OkStatus() : CurrentDeviceRuntime().SynchronizeStream(device, current_cuda_stream);
}

absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory(Device device) {
  if (!device.is_cuda()) return absl::InvalidArgumentError("device memory is queried for GPUs only");
  return CurrentDeviceRuntime().QueryMemory(device);
}

absl::StatusOr<int64_t> DevicePoolReservedBytes(Device device) {
  if (!device.is_cuda()) return int64_t{0};
  return CurrentDeviceRuntime().PoolReservedBytes(device);
}

absl::Status DeviceMalloc(Device device, size_t bytes, void** out) {
  return CurrentDeviceRuntime().Malloc(device, bytes, current_cuda_stream, out);
}

void DeviceFree(Device device, void* ptr) {
  if (ptr != nullptr) CurrentDeviceRuntime().Free(device, ptr, current_cuda_stream);
}

absl::Status DeviceMemset(Device device, void* ptr, int value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return CurrentDeviceRuntime().Memset(device, ptr, value, bytes, current_cuda_stream);
}

absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  return CurrentDeviceRuntime().Copy(dst, dst_device, src, src_device, bytes, current_cuda_stream);
}

absl::Status DeviceCopyRows(void* dst, size_t dst_pitch, Device dst_device, const void* src, size_t src_pitch,
                            Device src_device, size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return absl::OkStatus();
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    for (size_t r = 0; r < rows; ++r) {
      std::memmove(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
    }
    return absl::OkStatus();
  }
  return CurrentDeviceRuntime().CopyRows(dst, dst_pitch, dst_device, src, src_pitch, src_device, row_bytes, rows,
                                         current_cuda_stream);
}

}  // namespace seam

// One lane of a device link (one TP rank's GPU) as both ends use it: a
// stream of its own, the copy + checksum kernel's scratch (per-block
// partials, an arrival counter) and the mapped host word pair the kernel
// writes its checksum and ticket into, so the host waits for a launch by
// watching memory, with a deadline, instead of blocking in the driver.
// CUDA path only; internal to seam_handoff.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/device_copy_checksum.h"

namespace seam::handoff::device {

// Makes `device` current for a scope and restores the caller's device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;
  absl::Status status_;
};

class DeviceLane {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceLane>> Create(int device);
  ~DeviceLane();
  DeviceLane(const DeviceLane&) = delete;
  DeviceLane& operator=(const DeviceLane&) = delete;

  int device() const { return device_; }
  void* stream() const { return stream_; }  // cudaStream_t, non-blocking

  // Enqueues on this lane's stream (the caller's device must be this lane's):
  // a wait for `wait_event` (a cudaEvent_t, may be null), then the kernel
  // over `spans`, storing its checksum at `store` and reading `expected`
  // (device words, each may be null). Each launch takes the next ticket.
  absl::Status Launch(const CopySpan* spans, int count, uint64_t seed, void* wait_event, uint64_t* store = nullptr,
                      const uint64_t* expected = nullptr);
  // The checksum (and expected word) of the last launch, once the kernel
  // wrote them. DEADLINE_EXCEEDED past `deadline` (the kernel may still
  // run); a CUDA error of the stream.
  absl::StatusOr<CopyChecksumResult> Wait(absl::Time deadline);
  // A CUDA error the lane's stream reported (a fault of an earlier launch
  // nobody waited for), OK while it runs or idles.
  absl::Status StreamError() const;

 private:
  explicit DeviceLane(int device) : device_(device) {}

  int device_;
  void* stream_ = nullptr;
  uint64_t* partials_ = nullptr;
  unsigned int* arrivals_ = nullptr;
  CopyChecksumResult* result_ = nullptr;         // mapped host memory
  CopyChecksumResult* device_result_ = nullptr;  // its device-visible pointer
  uint64_t ticket_ = 0;
};

}  // namespace seam::handoff::device

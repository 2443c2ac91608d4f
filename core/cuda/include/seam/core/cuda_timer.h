// The device time of work issued on one CUDA stream, between two timing
// events (a load-time measurement, never inside a graph capture). Without
// the CUDA path Create fails.
#pragma once

#include <utility>

#include "absl/status/statusor.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device.h"

namespace seam {

class CudaTimer {
 public:
  static absl::StatusOr<CudaTimer> Create(Device device);
  CudaTimer() = default;
  CudaTimer(CudaTimer&& o) noexcept
      : start_(std::exchange(o.start_, nullptr)), stop_(std::exchange(o.stop_, nullptr)) {}
  CudaTimer& operator=(CudaTimer&& o) noexcept {
    std::swap(start_, o.start_);
    std::swap(stop_, o.stop_);
    return *this;
  }
  ~CudaTimer();

  // Marks the start on `stream` (the work issued on it from now on is timed).
  absl::Status Start(const CudaStream& stream);
  // Marks the end on `stream`, waits for it and returns the microseconds the
  // device spent from the start to here.
  absl::StatusOr<double> StopUs(const CudaStream& stream);

 private:
  void* start_ = nullptr;  // cudaEvent_t, timing on
  void* stop_ = nullptr;
};

}  // namespace seam

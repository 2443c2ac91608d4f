// weight_floor.h: the checkpoint layout's bytes and two copy measurements.
#include "weight_floor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"
#include "seam/weights/tensor_layout.h"

namespace seam::cli {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

double DecodeStepWeightBytes(const weights::ModelConfig& c, DType dtype) {
  double elements = 0;
  const double expert_share =
      c.num_experts > 0 ? static_cast<double>(c.num_experts_per_tok) / static_cast<double>(c.num_experts) : 1.0;
  for (const weights::TensorSpec& spec : weights::HfTensorLayout(c)) {
    const double n = static_cast<double>(NumElements(spec.shape));
    if (spec.name == "model.embed_tokens.weight") {
      if (c.tie_word_embeddings) elements += n;
    } else if (absl::StrContains(spec.name, ".mlp.experts.")) {
      elements += n * expert_share;
    } else {
      elements += n;
    }
  }
  return elements * static_cast<double>(DTypeSize(dtype));
}

absl::StatusOr<double> HostCopyBytesPerSecond(size_t bytes, int threads) {
  threads = std::max(1, threads);
  std::unique_ptr<char[]> src(new (std::nothrow) char[bytes]), dst(new (std::nothrow) char[bytes]);
  if (!src || !dst) return absl::InternalError("cannot allocate the copy buffers for the host bandwidth");
  const size_t slice = bytes / threads;
  const auto copy = [&](bool fill) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const size_t begin = t * slice, n = t + 1 == threads ? bytes - begin : slice;
        if (fill) std::memset(src.get() + begin, t + 1, n), std::memset(dst.get() + begin, 0, n);
        std::memcpy(dst.get() + begin, src.get() + begin, n);
      });
    }
    for (std::thread& w : workers) w.join();
  };
  copy(true);  // pages touched by the thread that copies them, untimed
  double best = 1e300;
  for (int r = 0; r < 5; ++r) {
    const Clock::time_point t0 = Clock::now();
    copy(false);
    best = std::min(best, SecondsSince(t0));
  }
  return 2.0 * static_cast<double>(bytes) / best;
}

absl::StatusOr<double> DeviceCopyBytesPerSecond(Device device, size_t bytes) {
  if (!device.is_cuda() || !CudaAvailable()) {
    return absl::FailedPreconditionError("no GPU is visible to this process (or it was built without CUDA)");
  }
  SEAM_RETURN_IF_ERROR(UseDevice(device));
  void *a = nullptr, *b = nullptr;
  SEAM_RETURN_IF_ERROR(DeviceMalloc(device, bytes, &a));
  if (absl::Status s = DeviceMalloc(device, bytes, &b); !s.ok()) {
    DeviceFree(device, a);
    return s;
  }
  const auto measure = [&]() -> absl::StatusOr<double> {
    SEAM_RETURN_IF_ERROR(DeviceMemset(device, a, 1, bytes));
    SEAM_RETURN_IF_ERROR(DeviceCopy(b, device, a, device, bytes));  // warm-up
    SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
    constexpr int kCopies = 20;
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kCopies; ++i) SEAM_RETURN_IF_ERROR(DeviceCopy(b, device, a, device, bytes));
    SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
    return 2.0 * static_cast<double>(bytes) * kCopies / SecondsSince(t0);
  };
  absl::StatusOr<double> result = measure();
  DeviceFree(device, a);
  DeviceFree(device, b);
  return result;
}

}  // namespace seam::cli

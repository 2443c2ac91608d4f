// measured_peaks.h: a large copy and seam's matmul, timed on the host clock
// around whole batches of calls (a GPU batch ends with a stream sync).
#include "seam/runtime/measured_peaks.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/core/device_memory.h"
#include "seam/core/sampling_seed.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"

namespace seam::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

absl::StatusOr<double> HostCopyRate(size_t bytes, int threads) {
  threads = std::max(1, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
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

absl::StatusOr<double> DeviceCopyRate(Device device, size_t bytes) {
  if (!device.is_cuda() || !CudaAvailable()) {
    return absl::FailedPreconditionError("no GPU is visible to this process (or it was built without CUDA)");
  }
  SEAM_RETURN_IF_ERROR(UseDevice(device));
  bytes = std::max<size_t>(4, bytes / 4 * 4);
  SEAM_ASSIGN_OR_RETURN(Tensor a, Tensor::TryEmpty({static_cast<int64_t>(bytes / 4)}, DType::kI32, device));
  SEAM_ASSIGN_OR_RETURN(Tensor b, Tensor::TryEmpty({static_cast<int64_t>(bytes / 4)}, DType::kI32, device));
  SEAM_RETURN_IF_ERROR(DeviceMemset(device, a.raw_data(), 1, bytes));
  SEAM_RETURN_IF_ERROR(DeviceCopy(b.raw_data(), device, a.raw_data(), device, bytes));  // warm-up
  SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
  constexpr int kCopies = 10;
  double best = 1e300;
  for (int r = 0; r < 3; ++r) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kCopies; ++i) {
      SEAM_RETURN_IF_ERROR(DeviceCopy(b.raw_data(), device, a.raw_data(), device, bytes));
    }
    SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
    best = std::min(best, SecondsSince(t0) / kCopies);
  }
  return 2.0 * static_cast<double>(bytes) / best;
}

// A matmul operand. Random: values uniform in [-1, 1) from a fixed-seed
// SplitMix64 sequence, rounded to dtype (every mantissa bit toggles, as in a model's
// weights and activations). Constant: every byte 0x3c (about 0.0115 in f32
// and bf16, 1.06 in f16), kept only for the comparison (measured_peaks.h).
absl::StatusOr<Tensor> Operand(const Shape& shape, DType dtype, Device device, MatmulData data, uint64_t seed) {
  if (data == MatmulData::kConstant) {
    SEAM_ASSIGN_OR_RETURN(Tensor t, Tensor::TryEmpty(shape, dtype, device));
    if (device.is_cuda()) {
      SEAM_RETURN_IF_ERROR(DeviceMemset(device, t.raw_data(), 0x3c, t.nbytes()));
    } else {
      std::memset(t.raw_data(), 0x3c, t.nbytes());
    }
    return t;
  }
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  uint64_t x = seed;
  for (float& v : values) {
    x = SplitMix64(x);
    v = static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0);
  }
  Tensor host = Tensor::FromFloats(values, shape, dtype);
  if (device.is_cpu()) return host;
  return host.To(device);
}

}  // namespace

absl::StatusOr<double> CopyBytesPerSecond(Device device, size_t bytes, int host_threads) {
  if (device.is_cpu()) return HostCopyRate(bytes, host_threads);
  return DeviceCopyRate(device, bytes);
}

absl::StatusOr<double> MatmulFlopsPerSecond(Device device, DType dtype, const MatmulShape& s, MatmulData data) {
  if (s.m < 1 || s.n < 1 || s.k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("matmul shape ", s.m, " x ", s.n, " x ", s.k, " is empty"));
  }
  if (device.is_cuda()) SEAM_RETURN_IF_ERROR(UseDevice(device));
  SEAM_ASSIGN_OR_RETURN(Tensor x, Operand({s.m, s.k}, dtype, device, data, 1));
  SEAM_ASSIGN_OR_RETURN(Tensor w, Operand({s.n, s.k}, dtype, device, data, 2));
  SEAM_ASSIGN_OR_RETURN(Tensor out, Tensor::TryEmpty({s.m, s.n}, dtype, device));
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, w, out));  // warm-up: library handles, kernel choice
  SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
  // Batches of about 20 ms at 1 PFLOP/s on a GPU, at 100 GFLOP/s on the host.
  const int calls = static_cast<int>(std::clamp((device.is_cuda() ? 2e13 : 2e9) / flops, 1.0, 200.0));
  double best = 1e300;
  for (int r = 0; r < 3; ++r) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < calls; ++i) SEAM_RETURN_IF_ERROR(kernels::Matmul(x, w, out));
    SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
    best = std::min(best, SecondsSince(t0) / calls);
  }
  return flops / best;
}

std::vector<MatmulShape> PrefillMatmulShapes(const weights::ModelConfig& c, int64_t rows) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  std::vector<MatmulShape> shapes{{rows, (c.num_attention_heads + 2 * c.num_key_value_heads) * d, h, "qkv"},
                                  {rows, h, c.num_attention_heads * d, "o"}};
  if (c.intermediate_size > 0) {
    const bool gated = !c.is_nemotron_h();  // Nemotron-H's MLP is up, squared ReLU, down
    shapes.push_back({rows, (gated ? 2 : 1) * c.intermediate_size, h, gated ? "gate_up" : "up"});
    shapes.push_back({rows, h, c.intermediate_size, "down"});
  }
  if (c.is_nemotron_h() && c.mamba_num_heads > 0) {
    shapes.push_back({rows, c.mamba_intermediate() + c.mamba_conv_dim() + c.mamba_num_heads, h, "mamba_in"});
    shapes.push_back({rows, h, c.mamba_intermediate(), "mamba_out"});
  }
  return shapes;
}

absl::StatusOr<MatmulPeak> BestMatmulFlopsPerSecond(Device device, DType dtype, const weights::ModelConfig& config,
                                                    int64_t rows) {
  const int64_t square = device.is_cuda() ? 8192 : 1024;
  std::vector<MatmulShape> shapes{{square, square, square, "square"}};
  for (const MatmulShape& s : PrefillMatmulShapes(config, rows)) shapes.push_back(s);
  MatmulPeak peak;
  for (const MatmulShape& s : shapes) {
    SEAM_ASSIGN_OR_RETURN(const double rate, MatmulFlopsPerSecond(device, dtype, s));
    peak.rates.emplace_back(s, rate);
    if (rate > peak.flops_per_s) peak.flops_per_s = rate, peak.best = s;
  }
  return peak;
}

}  // namespace seam::runtime

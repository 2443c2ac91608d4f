// WriteRandomCheckpoint: deterministic random weights for every tensor of
// HfTensorLayout, each drawn from its own stream (seed mixed with its name).
#include "seam/weights/random_checkpoint.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "seam/core/progress.h"
#include "seam/core/status.h"
#include "seam/weights/safetensors.h"
#include "seam/weights/tensor_layout.h"

namespace seam::weights {
namespace {

// splitmix64: small, fast, identical on every platform (unlike std:: distributions).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t Int(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  double Normal() {  // Box-Muller
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

uint64_t NameHash(const std::string& name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Mamba's A_log and dt_bias as transformers initialises them: A = -exp(A_log)
// with A_log = log of a draw in [1, 16]; dt_bias the inverse softplus of a
// time step drawn log-uniformly in [time_step_min, time_step_max].
float MambaInit(TensorInit init, Rng& rng, const ModelConfig& c) {
  if (init == TensorInit::kMambaA) return static_cast<float>(std::log(1.0 + 15.0 * rng.Uniform()));
  const double lo = std::log(c.time_step_min), hi = std::log(c.time_step_max);
  const double dt = std::max<double>(std::exp(lo + (hi - lo) * rng.Uniform()), c.time_step_floor);
  return static_cast<float>(dt + std::log(-std::expm1(-dt)));
}

Tensor RandomTensor(const TensorSpec& spec, const RandomCheckpointOptions& o, const ModelConfig& c) {
  const DType dtype = c.dtype;
  Rng rng(o.seed ^ NameHash(spec.name));
  std::vector<float> values(NumElements(spec.shape));
  for (float& v : values) {
    if (spec.init != TensorInit::kNoise) {
      v = MambaInit(spec.init, rng, c);
    } else if (o.exact) {
      v = spec.is_norm ? static_cast<float>(rng.Int(4, 12)) / 8.0f : static_cast<float>(rng.Int(-16, 16)) / 64.0f;
    } else {
      const double noise = 0.02 * o.scale * rng.Normal();
      v = static_cast<float>(spec.is_norm ? 1.0 + noise : noise);
    }
  }
  return Tensor::FromFloats(values, spec.shape, dtype);
}

}  // namespace

absl::Status WriteRandomCheckpoint(const ModelConfig& config, const RandomCheckpointOptions& options,
                                   const std::string& out_dir) {
  // The config must survive the round trip through config.json text: that is
  // exactly what a reader of the checkpoint will see.
  const std::string config_text = ModelConfigToJson(config);
  auto reparsed = ParseModelConfig(config_text);
  if (!reparsed.ok()) return Annotate(reparsed.status(), "random checkpoint config");
  if (!IsFloating(config.dtype) || config.dtype == DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat("random checkpoint: dtype ", DTypeName(config.dtype),
                                                   " is not a checkpoint dtype (f32, bf16 or f16)"));
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create directory ", out_dir, ": ", ec.message()));

  const std::vector<TensorSpec> layout = HfTensorLayout(*reparsed);
  int64_t bytes = 0;
  for (const TensorSpec& spec : layout) bytes += NumElements(spec.shape) * DTypeSize(config.dtype);
  // Each tensor draws from its own stream, so the tensors are drawn on every
  // core at once with the same values as one after another.
  std::vector<std::pair<std::string, Tensor>> tensors(layout.size());
  {
    Progress progress(absl::StrCat("drawing random weights (", layout.size(), " tensors)"), bytes,
                      ProgressUnit::kBytes);
    std::atomic<size_t> next{0};
    std::mutex progress_mu;
    auto draw = [&] {
      for (size_t i = next++; i < layout.size(); i = next++) {
        tensors[i] = {layout[i].name, RandomTensor(layout[i], options, *reparsed)};
        std::lock_guard<std::mutex> lock(progress_mu);
        progress.Advance(tensors[i].second.nbytes(), layout[i].name);
      }
    };
    const size_t threads = std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), layout.size()));
    std::vector<std::thread> workers;
    for (size_t t = 1; t < threads; ++t) workers.emplace_back(draw);
    draw();
    for (std::thread& w : workers) w.join();
  }
  const std::string weights_path = out_dir + "/model.safetensors";
  Progress progress(absl::StrCat("writing ", weights_path), bytes, ProgressUnit::kBytes);
  absl::Status written = WriteSafetensors(weights_path, tensors, [&progress](const std::string& name, int64_t n) {
    progress.Advance(n, name);
  });
  if (!written.ok()) progress.Fail();
  SEAM_RETURN_IF_ERROR(written);
  progress.Finish();

  const std::string config_path = out_dir + "/config.json";
  std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
  out << config_text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("write ", config_path, " failed"));
  return absl::OkStatus();
}

}  // namespace seam::weights

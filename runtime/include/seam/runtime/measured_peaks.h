// What this machine does at best, measured now: the memory bandwidth of a
// large copy and the rate of seam's own matmul. Floors (step_floor.h) are
// divided by these, so every benchmark states its figures against peaks
// measured in the same run. Each call allocates its buffers, times a few
// repeats after a warm-up and frees them; not for use while another thread
// of the process drives the same GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"
#include "seam/weights/model_config.h"

namespace seam::runtime {

// Memory traffic in bytes/s of copying `bytes`, best of a few repeats; a copy
// counts its bytes twice (read and written). On the host the copy is split
// over `host_threads` threads (every core: the bandwidth CPU ranks share);
// on a GPU it is one device-to-device copy on the calling thread's stream.
// INTERNAL when host memory is short; FAILED_PRECONDITION for a GPU without
// the CUDA path or a visible GPU; the allocation's status otherwise.
absl::StatusOr<double> CopyBytesPerSecond(Device device, size_t bytes, int host_threads = 0);

// One matmul shape: out[m, n] = x[m, k] . w[n, k]^T.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  const char* name = "";  // what it is in the model: "qkv", "o", "gate_up", "down", ...
};

// What a timed matmul multiplies. kRandom (what every floor divides by):
// values spread like a model's weights and activations. kConstant: one
// repeated value. A GPU's power draw, and with it the clock its power limit
// allows, depends on the data the tensor cores see, so only kRandom measures
// the rate a model's matmuls can reach; kConstant is kept to state the
// difference beside it.
enum class MatmulData { kRandom, kConstant };

// FLOP/s of kernels::Matmul at `shape` in `dtype` on `device` (2 m n k per
// call), best of a few timed batches after a warm-up.
absl::StatusOr<double> MatmulFlopsPerSecond(Device device, DType dtype, const MatmulShape& shape,
                                            MatmulData data = MatmulData::kRandom);

// The model's prefill matmuls at `rows` token rows: q|k|v, o, gate|up and
// down of its attention and dense MLP (Nemotron-H: up and down, and its
// Mamba in/out projections).
std::vector<MatmulShape> PrefillMatmulShapes(const weights::ModelConfig& config, int64_t rows);

// seam's best matmul rate: the most FLOP/s over a square matmul (8192 on a
// GPU, 1024 on the host) and PrefillMatmulShapes(config, rows). The figure a
// prefill's FLOPs are stated against.
struct MatmulPeak {
  double flops_per_s = 0;
  MatmulShape best;  // the shape that reached it
  std::vector<std::pair<MatmulShape, double>> rates;  // every shape timed, square first, and its FLOP/s
};
absl::StatusOr<MatmulPeak> BestMatmulFlopsPerSecond(Device device, DType dtype, const weights::ModelConfig& config,
                                                    int64_t rows);

}  // namespace seam::runtime

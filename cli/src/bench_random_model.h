// The random qwen3 checkpoint a benchmark writes for itself when given no
// --model (`seam bench serve`, `seam bench load`): its sizes as the flags
// give them, checked, then written with seed 1 (BOS 0, EOS 1).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "seam/core/dtype.h"
#include "seam/weights/model_config.h"

namespace seam::cli {

struct RandomModelSizes {
  int64_t layers = 4;
  int64_t hidden = 512;
  int64_t heads = 8;
  int64_t kv_heads = 4;
  int64_t head_dim = 0;      // 0: hidden / heads
  int64_t intermediate = 0;  // 0: 3 x hidden
  int64_t vocab = 4096;
};

// "" when the sizes make a model that `pp` stages can split; else what to fix.
std::string CheckRandomModelSizes(const RandomModelSizes& sizes, int pp);

weights::ModelConfig RandomQwen3Config(const RandomModelSizes& sizes, DType dtype);

// RandomQwen3Config written to `dir` with random weights.
absl::Status WriteRandomQwen3(const RandomModelSizes& sizes, DType dtype, const std::string& dir);

}  // namespace seam::cli

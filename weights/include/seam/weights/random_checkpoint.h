// WriteRandomCheckpoint: a small Hugging Face checkpoint (config.json +
// model.safetensors) with random weights, for tests and `seam model init`.
// transformers loads it as Qwen3ForCausalLM / Qwen3MoeForCausalLM /
// NemotronHForCausalLM.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "seam/weights/model_config.h"

namespace seam::weights {

struct RandomCheckpointOptions {
  uint64_t seed = 0;  // same seed and config -> same bytes
  // false: projections ~ normal with std 0.02·scale (like initializer_range),
  //        norm weights 1 + normal with std 0.02·scale.
  // true:  dyadic values, exact in bf16 and small enough that fp32 sums stay
  //        exact: projections multiples of 1/64 in [-1/4, 1/4], norm weights
  //        multiples of 1/8 in [1/2, 3/2] (`scale` is ignored).
  bool exact = false;
  float scale = 1.0f;
};

// Creates `out_dir` if needed and writes config.json (ModelConfigToJson) and
// model.safetensors in config.dtype (f32, bf16 or f16). INVALID_ARGUMENT for a
// config that cannot describe a model; INTERNAL naming the path for I/O errors.
absl::Status WriteRandomCheckpoint(const ModelConfig& config, const RandomCheckpointOptions& options,
                                   const std::string& out_dir);

}  // namespace seam::weights

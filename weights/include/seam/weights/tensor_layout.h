// The tensors of a Hugging Face Qwen3 / Qwen3-MoE / Nemotron-H checkpoint:
// every name transformers uses and the shape the config implies, in model
// order. Nemotron-H tensors carry the "backbone." prefix of the published
// checkpoints (transformers 5 renames it to "model." when it loads them).
#pragma once

#include <string>
#include <vector>

#include "seam/core/tensor.h"
#include "seam/weights/model_config.h"

namespace seam::weights {

// How a random checkpoint initialises a tensor beyond plain noise.
enum class TensorInit : uint8_t {
  kNoise,    // normal noise (around 1.0 when is_norm)
  kMambaA,   // A_log: log of a uniform draw in [1, 16]
  kMambaDt,  // dt_bias: softplus⁻¹ of a log-uniform draw in [time_step_min, time_step_max]
};

struct TensorSpec {
  std::string name;   // e.g. "model.layers.3.self_attn.q_proj.weight"
  Shape shape;        // e.g. [num_attention_heads·head_dim, hidden_size]
  bool is_norm = false;  // an RMSNorm weight or Mamba's D (initialised around 1.0)
  TensorInit init = TensorInit::kNoise;
};

// Nemotron-H's tensor name prefix as the published checkpoints write it.
inline constexpr char kNemotronHPrefix[] = "backbone.";

// Embedding, per layer (norms, attention, dense MLP or router + experts),
// final norm, and lm_head unless tie_word_embeddings.
std::vector<TensorSpec> HfTensorLayout(const ModelConfig& config);

}  // namespace seam::weights

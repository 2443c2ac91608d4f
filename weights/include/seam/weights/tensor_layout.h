// The tensors of a Hugging Face Qwen3 / Qwen3-MoE checkpoint: every name
// transformers uses and the shape the config implies, in model order.
#pragma once

#include <string>
#include <vector>

#include "seam/core/tensor.h"
#include "seam/weights/model_config.h"

namespace seam::weights {

struct TensorSpec {
  std::string name;   // e.g. "model.layers.3.self_attn.q_proj.weight"
  Shape shape;        // e.g. [num_attention_heads·head_dim, hidden_size]
  bool is_norm = false;  // an RMSNorm weight (initialised around 1.0)
};

// Embedding, per layer (norms, attention, dense MLP or router + experts),
// final norm, and lm_head unless tie_word_embeddings.
std::vector<TensorSpec> HfTensorLayout(const ModelConfig& config);

}  // namespace seam::weights

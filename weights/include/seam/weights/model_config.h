// ModelConfig: the fields of a Hugging Face config.json that seam's models
// read, parsed and validated. Supported architectures: Qwen3ForCausalLM
// ("qwen3") and Qwen3MoeForCausalLM ("qwen3_moe").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/dtype.h"

namespace seam::weights {

struct ModelConfig {
  std::string architecture;  // "qwen3" or "qwen3_moe"
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 1000000.0f;
  int64_t max_position_embeddings = 32768;
  bool tie_word_embeddings = false;
  DType dtype = DType::kF32;  // torch_dtype
  int64_t bos_token_id = -1, eos_token_id = -1;
  // MoE (qwen3_moe only).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  bool is_moe() const { return architecture == "qwen3_moe"; }
  // True when layer `l` uses the sparse MoE block (HF's rule).
  bool IsSparseLayer(int64_t layer) const;
};

// Parses config.json text. INVALID_ARGUMENT naming the field for a missing or
// wrong-typed field; UNIMPLEMENTED naming the architecture for an unsupported one.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);
// Writes config.json text with exactly the keys transformers writes for the architecture.
std::string ModelConfigToJson(const ModelConfig& config);

// Checks that the config divides over TP size `tp` with attention-DP size
// `attn_dp`: heads and KV heads over attention TP, intermediate sizes over TP.
// INVALID_ARGUMENT naming the field and the sizes, e.g.
// "num_attention_heads (6) does not divide over attention TP 4".
absl::Status ValidateParallel(const ModelConfig& config, int tp, int attn_dp);

}  // namespace seam::weights

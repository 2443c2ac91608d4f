// `seam model init`: writes a small Hugging Face checkpoint (config.json and
// model.safetensors) with random weights for a Qwen3, Qwen3-MoE, Nemotron-H
// (Mamba2 / attention / MLP hybrid) or LongCat-Flash shape, which
// transformers and seam's stage servers both load.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace seam::cli {

struct ModelInitCommandOptions {
  std::string arch = "qwen3";  // qwen3 | qwen3_moe | nemotron_h | longcat_flash (also spelled longcat)
  int64_t layers = 0;          // num_hidden_layers (required; longcat_flash: num_layers, its logical layers)
  int64_t hidden = 0;          // hidden_size (required)
  int64_t heads = 0;           // num_attention_heads (required)
  int64_t kv_heads = 0;        // num_key_value_heads (0: same as heads)
  int64_t head_dim = 0;        // head_dim (0: hidden / heads)
  int64_t intermediate = 0;    // intermediate_size (required)
  int64_t vocab = 0;           // vocab_size (required)
  int64_t experts = 0;         // num_experts (qwen3_moe only, required there)
  int64_t top_k = 0;           // num_experts_per_tok (qwen3_moe only, required there)
  int64_t moe_intermediate = 0;  // moe_intermediate_size (qwen3_moe only, required there)
  // longcat_flash only (with --experts, --top-k, --moe-intermediate for its
  // routed experts, --intermediate for its dense MLPs): the zero experts,
  // the routing scale and MLA's sizes (required there).
  int64_t zero_experts = 0;     // zero_expert_num
  double routed_scaling = 1.0;  // routed_scaling_factor
  int64_t q_lora_rank = 0, kv_lora_rank = 0, nope_dim = 0, rope_dim = 0, v_head_dim = 0;
  // nemotron_h only: hybrid_override_pattern (its length must equal
  // --layers; M Mamba2, * attention, - MLP) and the Mamba2 block's sizes.
  std::string pattern;
  int64_t mamba_heads = 0;     // mamba_num_heads (required for nemotron_h)
  int64_t mamba_head_dim = 0;  // mamba_head_dim (required for nemotron_h)
  int64_t groups = 1;          // n_groups
  int64_t state = 16;          // ssm_state_size
  int64_t conv_kernel = 4;     // conv_kernel
  int64_t chunk = 64;          // chunk_size
  std::string dtype = "f32";   // f32 | bf16
  double scale = 1.0;          // projections ~ normal(0, 0.02·scale)
  uint64_t seed = 0;           // random weights seed
  bool exact = false;          // dyadic weights (exact fp32 sums)
  bool tie_embeddings = false; // tie_word_embeddings (no lm_head.weight)
  std::string out;             // output directory (required; created if missing)
  bool force = false;          // overwrite a checkpoint already in `out`
};

// Writes the checkpoint and returns the summary line to print.
// INVALID_ARGUMENT (exit 2) names the bad flag or the shape that does not
// fit; ALREADY_EXISTS (exit 1) when `out` holds config.json or
// model.safetensors and `force` is false; any other error (exit 1): the
// files could not be written.
absl::StatusOr<std::string> RunModelInitCommand(const ModelInitCommandOptions& options);

}  // namespace seam::cli

// ModelConfig: the fields of a Hugging Face config.json that seam's models
// read, parsed and validated. Supported architectures: Qwen3ForCausalLM
// ("qwen3"), Qwen3MoeForCausalLM ("qwen3_moe"), NemotronHForCausalLM
// ("nemotron_h", the hybrid of Mamba2, attention and MLP layers) and
// LongcatFlashForCausalLM ("longcat_flash": MLA attention, a shortcut MoE
// with zero-computation experts beside a dense path).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/dtype.h"

namespace seam::weights {

// What one layer of a hybrid (nemotron_h) stack is: one character of
// hybrid_override_pattern each.
enum class HybridLayer : uint8_t { kMamba, kAttention, kMlp };  // 'M', '*', '-'
const char* HybridLayerName(HybridLayer kind);                  // "mamba", "attention", "mlp"

struct ModelConfig {
  std::string architecture;  // "qwen3", "qwen3_moe", "nemotron_h" or "longcat_flash"
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

  // Nemotron-H (nemotron_h only). rms_norm_eps holds layer_norm_epsilon;
  // intermediate_size is the MLP layers' (squared-ReLU up/down); attention
  // layers have no rotary embedding and no q/k norm.
  std::string hybrid_override_pattern;  // one of M, *, - per layer
  int64_t mamba_num_heads = 0, mamba_head_dim = 0;
  int64_t n_groups = 0;        // B/C groups; the gated norm's groups too
  int64_t ssm_state_size = 0;  // N
  int64_t conv_kernel = 0;     // K of the causal depthwise conv1d
  int64_t chunk_size = 0;      // the scan's chunk (no effect on the result)
  bool use_conv_bias = true;
  // dt = softplus(dt + dt_bias) clamped to [time_step_limit_min, time_step_limit_max].
  float time_step_limit_min = 0.0f, time_step_limit_max = std::numeric_limits<float>::infinity();
  float time_step_min = 0.001f, time_step_max = 0.1f, time_step_floor = 1e-4f;  // dt_bias initialisation only
  bool residual_in_fp32 = false;

  // LongCat-Flash (longcat_flash only). num_hidden_layers counts its logical
  // layers (transformers' num_layers; its config.json's num_hidden_layers is
  // twice that, one per attention); each holds two MLA attentions, two dense
  // MLPs (intermediate_size: ffn_hidden_size) and one MoE
  // (num_experts: n_routed_experts, num_experts_per_tok: moe_topk,
  // moe_intermediate_size: expert_ffn_hidden_size) with zero_expert_num
  // identity experts. head_dim is qk_rope_head_dim (the rotary dimension).
  int64_t q_lora_rank = 0, kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t zero_expert_num = 0;
  float routed_scaling_factor = 1.0f;

  bool is_moe() const { return architecture == "qwen3_moe"; }
  bool is_nemotron_h() const { return architecture == "nemotron_h"; }
  bool is_longcat_flash() const { return architecture == "longcat_flash"; }
  // nemotron_h: the kind of layer `l` (its pattern character).
  HybridLayer LayerKind(int64_t layer) const;
  int64_t mamba_intermediate() const { return mamba_num_heads * mamba_head_dim; }
  // Channels of the conv1d: x, B and C.
  int64_t mamba_conv_dim() const { return mamba_intermediate() + 2 * n_groups * ssm_state_size; }
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
// `attn_dp`: heads and KV heads over attention TP, intermediate sizes over TP;
// nemotron_h: Mamba heads and groups over attention TP too (a gated-norm group
// never spans ranks).
// INVALID_ARGUMENT naming the field and the sizes, e.g.
// "num_attention_heads (6) does not divide over attention TP 4".
absl::Status ValidateParallel(const ModelConfig& config, int tp, int attn_dp);

}  // namespace seam::weights

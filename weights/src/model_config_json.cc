// ModelConfigToJson: config.json text with exactly the keys transformers
// 4.51 writes for Qwen3Config / Qwen3MoeConfig (sorted, indented by 2).
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "seam/weights/model_config.h"
#include "src/config_fields.h"

namespace seam::weights {
namespace internal {

// The shortest decimal that reads back as `f`, as a double, so that 1e-6f is
// written "1e-06" rather than "9.999999974752427e-07".
double ShortestDecimal(float f) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

nlohmann::json TokenIdJson(int64_t id) { return id < 0 ? nlohmann::json(nullptr) : nlohmann::json(id); }

const char* TorchDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return "float32";
  }
}

}  // namespace internal

using internal::ShortestDecimal;

std::string ModelConfigToJson(const ModelConfig& c) {
  if (c.is_nemotron_h()) return internal::NemotronHConfigToJson(c);
  if (c.is_longcat_flash()) return internal::LongcatFlashConfigToJson(c);
  nlohmann::json j;
  j["architectures"] = nlohmann::json::array({c.is_moe() ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"});
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = internal::TokenIdJson(c.bos_token_id);
  j["eos_token_id"] = internal::TokenIdJson(c.eos_token_id);
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["max_window_layers"] = c.num_hidden_layers;
  j["model_type"] = c.is_moe() ? "qwen3_moe" : "qwen3";
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = ShortestDecimal(c.rms_norm_eps);
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = ShortestDecimal(c.rope_theta);
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = internal::TorchDTypeName(c.dtype);
  j["transformers_version"] = "4.51.0";
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["vocab_size"] = c.vocab_size;
  if (c.is_moe()) {
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = 0.001;
  }
  return j.dump(2) + "\n";
}

}  // namespace seam::weights

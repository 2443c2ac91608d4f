// ModelConfig parsing from config.json, the HF sparse-layer rule, and the
// checks that a config divides over a tensor-parallel topology.
#include "seam/weights/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "src/config_fields.h"

namespace seam::weights {
namespace internal {

bool IsInferenceNeutralField(const std::string& key) {
  static const std::set<std::string> fields = {
      "architectures", "model_type", "transformers_version", "_name_or_path", "auto_map", "torch_dtype", "dtype",
      "bos_token_id", "eos_token_id", "pad_token_id", "return_dict", "output_attentions", "output_hidden_states",
      "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "chunk_size_feed_forward", "is_decoder",
      "is_encoder_decoder", "add_cross_attention", "tie_encoder_decoder", "finetuning_task", "id2label",
      "label2id", "problem_type", "tokenizer_class", "prefix", "task_specific_params", "max_length", "min_length",
      "do_sample", "early_stopping", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "num_return_sequences", "use_return_dict"};
  return fields.count(key) != 0;
}

absl::Status FieldError(const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: field '", key, "' ", what));
}

absl::Status ReadInt(const Json& j, const std::string& key, int64_t* out, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return required ? FieldError(key, "is missing") : absl::OkStatus();
  }
  if (!it->is_number_integer()) return FieldError(key, absl::StrCat("must be an integer, got ", it->dump()));
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& j, const std::string& key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return FieldError(key, absl::StrCat("must be true or false, got ", it->dump()));
  *out = it->get<bool>();
  return absl::OkStatus();
}

// A token id field that may be an integer or a list of integers (the first counts).
absl::Status ReadTokenId(const Json& j, const std::string& key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  const Json& v = it->is_array() && !it->empty() ? (*it)[0] : *it;
  if (!v.is_number_integer()) return FieldError(key, absl::StrCat("must be an integer or a list of integers, got ", it->dump()));
  *out = v.get<int64_t>();
  return absl::OkStatus();
}

absl::StatusOr<DType> ReadTorchDType(const Json& j) {
  const char* key = j.contains("torch_dtype") ? "torch_dtype" : "dtype";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return DType::kF32;  // transformers' default
  if (!it->is_string()) return FieldError(key, absl::StrCat("must be a string, got ", it->dump()));
  const std::string s = it->get<std::string>();
  if (s == "float32") return DType::kF32;
  if (s == "bfloat16") return DType::kBF16;
  if (s == "float16") return DType::kF16;
  return absl::UnimplementedError(absl::StrCat("config.json: ", key, " '", s,
                                               "' is not supported (float32, bfloat16 or float16)"));
}

}  // namespace internal

namespace {

using internal::FieldError;
using internal::Json;
using internal::ReadBool;
using internal::ReadFloat;
using internal::ReadInt;
using internal::ReadTokenId;
using internal::ReadTorchDType;

absl::StatusOr<std::string> ReadArchitecture(const Json& j) {
  auto it = j.find("architectures");
  if (it == j.end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) {
    return FieldError("architectures", "must be a non-empty list of names");
  }
  const std::string name = (*it)[0].get<std::string>();
  if (name == "Qwen3ForCausalLM") return std::string("qwen3");
  if (name == "Qwen3MoeForCausalLM") return std::string("qwen3_moe");
  if (name == "NemotronHForCausalLM") return std::string("nemotron_h");
  if (name == "LongcatFlashForCausalLM") return std::string("longcat_flash");
  return absl::UnimplementedError(absl::StrCat("config.json: architecture '", name,
                                               "' is not supported (supported: Qwen3ForCausalLM, "
                                               "Qwen3MoeForCausalLM, NemotronHForCausalLM, "
                                               "LongcatFlashForCausalLM)"));
}


// Every field of a Qwen3 / Qwen3-MoE config.json that seam reads or checks
// (below), or that does not change what inference computes (initialisation,
// training-only settings, a sliding window that use_sliding_window leaves
// off, the router's training loss). Any other field is refused by name: it
// may change the arithmetic (quantization_config, a bias, a shared expert).
const std::set<std::string>& Qwen3Fields() {
  static const std::set<std::string> fields = {
      "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
      "intermediate_size", "rms_norm_eps", "rope_theta", "rope_parameters", "rope_scaling",
      "max_position_embeddings", "tie_word_embeddings", "hidden_act", "attention_bias", "use_sliding_window",
      "sliding_window", "max_window_layers", "layer_types", "attention_dropout", "initializer_range", "use_cache",
      "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
      "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef", "output_router_logits"};
  return fields;
}

// Features seam's Qwen3 models do not implement: refuse rather than compute
// something different from transformers.
absl::Status RefuseUnsupported(const Json& j) {
  for (const auto& [key, value] : j.items()) {
    if (Qwen3Fields().count(key) == 0 && !internal::IsInferenceNeutralField(key)) {
      return absl::UnimplementedError(absl::StrCat("config.json: field '", key, "' is not supported for qwen3"));
    }
  }
  bool flag = false;
  SEAM_RETURN_IF_ERROR(ReadBool(j, "attention_bias", &flag));
  if (flag) return absl::UnimplementedError("config.json: attention_bias=true is not supported");
  flag = false;
  SEAM_RETURN_IF_ERROR(ReadBool(j, "use_sliding_window", &flag));
  if (flag) return absl::UnimplementedError("config.json: use_sliding_window=true is not supported");
  auto it = j.find("rope_scaling");
  if (it != j.end() && !it->is_null()) {
    return absl::UnimplementedError(absl::StrCat("config.json: rope_scaling ", it->dump(), " is not supported"));
  }
  it = j.find("hidden_act");
  if (it != j.end() && !it->is_null() && *it != "silu" && *it != "swish") {
    return absl::UnimplementedError(absl::StrCat("config.json: hidden_act ", it->dump(), " is not supported (silu)"));
  }
  it = j.find("layer_types");  // transformers 5.x
  if (it != j.end() && it->is_array()) {
    for (const Json& t : *it) {
      if (t != "full_attention") {
        return absl::UnimplementedError(absl::StrCat("config.json: layer type ", t.dump(), " is not supported"));
      }
    }
  }
  return absl::OkStatus();
}

// rope_theta: top-level in transformers 4.x; inside "rope_parameters" in 5.x,
// where any rope_type but "default" is a scaling seam does not implement.
absl::Status ReadRope(const Json& j, float* rope_theta) {
  auto it = j.find("rope_parameters");
  if (it == j.end() || it->is_null()) return ReadFloat(j, "rope_theta", rope_theta);
  if (!it->is_object()) return FieldError("rope_parameters", "must be an object");
  auto type = it->find("rope_type");
  if (type != it->end() && *type != "default") {
    return absl::UnimplementedError(absl::StrCat("config.json: rope_parameters ", it->dump(), " is not supported"));
  }
  for (const auto& [key, value] : it->items()) {
    if (key != "rope_type" && key != "rope_theta") {
      return absl::UnimplementedError(
          absl::StrCat("config.json: field 'rope_parameters.", key, "' is not supported (", value.dump(), ")"));
    }
  }
  return ReadFloat(*it, "rope_theta", rope_theta);
}

absl::Status ReadMoe(const Json& j, ModelConfig* c) {
  // transformers 5.x names the expert count "num_local_experts".
  SEAM_RETURN_IF_ERROR(ReadInt(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", &c->num_experts,
                               true));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_experts_per_tok", &c->num_experts_per_tok, true));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "moe_intermediate_size", &c->moe_intermediate_size, true));
  c->norm_topk_prob = false;  // Qwen3MoeConfig's default
  SEAM_RETURN_IF_ERROR(ReadBool(j, "norm_topk_prob", &c->norm_topk_prob));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "decoder_sparse_step", &c->decoder_sparse_step, false));
  auto it = j.find("mlp_only_layers");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_array()) return FieldError("mlp_only_layers", "must be a list of layer indices");
    for (const Json& v : *it) {
      if (!v.is_number_integer()) return FieldError("mlp_only_layers", "must be a list of layer indices");
      c->mlp_only_layers.push_back(v.get<int64_t>());
    }
  }
  if (c->decoder_sparse_step < 1) return FieldError("decoder_sparse_step", "must be at least 1");
  if (c->num_experts < 1) return FieldError("num_experts", "must be at least 1");
  if (c->num_experts_per_tok < 1 || c->num_experts_per_tok > c->num_experts) {
    return FieldError("num_experts_per_tok", absl::StrCat("must be in [1, num_experts=", c->num_experts, "], got ",
                                                          c->num_experts_per_tok));
  }
  if (c->moe_intermediate_size < 1) return FieldError("moe_intermediate_size", "must be at least 1");
  return absl::OkStatus();
}

}  // namespace

bool ModelConfig::IsSparseLayer(int64_t layer) const {
  if (!is_moe() || num_experts <= 0 || decoder_sparse_step < 1) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text) {
  Json j = Json::parse(internal::QuoteNonFiniteNumbers(json_text), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  internal::UnwrapFloatObjects(j);
  ModelConfig c;
  SEAM_ASSIGN_OR_RETURN(c.architecture, ReadArchitecture(j));
  if (c.is_nemotron_h()) {
    SEAM_RETURN_IF_ERROR(internal::ParseNemotronH(j, &c));
    return c;
  }
  if (c.is_longcat_flash()) {
    SEAM_RETURN_IF_ERROR(internal::ParseLongcatFlash(j, &c));
    return c;
  }
  SEAM_RETURN_IF_ERROR(RefuseUnsupported(j));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "hidden_size", &c.hidden_size, true));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &c.num_hidden_layers, true));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_attention_heads", &c.num_attention_heads, true));
  c.num_key_value_heads = c.num_attention_heads;  // transformers' default when absent
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_key_value_heads", &c.num_key_value_heads, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "intermediate_size", &c.intermediate_size, true));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c.vocab_size, true));
  const std::pair<const char*, int64_t> sizes[] = {
      {"hidden_size", c.hidden_size},         {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
      {"intermediate_size", c.intermediate_size},     {"vocab_size", c.vocab_size}};
  for (const auto& [key, value] : sizes) {
    if (value < 1) return FieldError(key, absl::StrCat("must be at least 1, got ", value));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "head_dim", &c.head_dim, false));
  if (c.head_dim < 1) return FieldError("head_dim", absl::StrCat("must be at least 1, got ", c.head_dim));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return FieldError("num_key_value_heads", absl::StrCat("(", c.num_key_value_heads,
                                                          ") must divide num_attention_heads (",
                                                          c.num_attention_heads, ")"));
  }
  c.rms_norm_eps = 1e-6f;
  SEAM_RETURN_IF_ERROR(ReadFloat(j, "rms_norm_eps", &c.rms_norm_eps));
  c.rope_theta = 10000.0f;  // Qwen3Config's default when absent
  SEAM_RETURN_IF_ERROR(ReadRope(j, &c.rope_theta));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "max_position_embeddings", &c.max_position_embeddings, false));
  c.tie_word_embeddings = false;
  SEAM_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", &c.tie_word_embeddings));
  SEAM_ASSIGN_OR_RETURN(c.dtype, ReadTorchDType(j));
  SEAM_RETURN_IF_ERROR(ReadTokenId(j, "bos_token_id", &c.bos_token_id));
  SEAM_RETURN_IF_ERROR(ReadTokenId(j, "eos_token_id", &c.eos_token_id));
  if (c.is_moe()) SEAM_RETURN_IF_ERROR(ReadMoe(j, &c));
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("model config not found: ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto config = ParseModelConfig(text.str());
  if (!config.ok()) return Annotate(config.status(), path);
  return config;
}

absl::Status ValidateParallel(const ModelConfig& config, int tp, int attn_dp) {
  if (tp < 1) return absl::InvalidArgumentError(absl::StrCat("TP size must be at least 1, got ", tp));
  if (attn_dp < 1 || tp % attn_dp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention DP size ", attn_dp, " does not divide TP size ", tp));
  }
  const int attn_tp = tp / attn_dp;
  if (config.is_nemotron_h()) return internal::ValidateNemotronHParallel(config, tp, attn_tp);
  if (config.is_longcat_flash()) return internal::ValidateLongcatFlashParallel(config, tp, attn_tp);
  if (config.num_attention_heads % attn_tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_attention_heads (", config.num_attention_heads,
                                                   ") does not divide over attention TP ", attn_tp));
  }
  if (config.num_key_value_heads % attn_tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_key_value_heads (", config.num_key_value_heads, ") does not divide over attention TP ", attn_tp,
        " (KV heads must divide over attention TP; replicated KV heads are not supported)"));
  }
  bool any_dense = false, any_sparse = false;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    (config.IsSparseLayer(l) ? any_sparse : any_dense) = true;
  }
  if (any_dense && config.intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("intermediate_size (", config.intermediate_size,
                                                   ") does not divide over TP ", tp, " (dense FFN layers)"));
  }
  if (any_sparse && config.moe_intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("moe_intermediate_size (", config.moe_intermediate_size,
                                                   ") does not divide over TP ", tp, " (MoE expert layers)"));
  }
  return absl::OkStatus();
}

}  // namespace seam::weights

// nemotron_h's config.json: the layer pattern (hybrid_override_pattern, or
// transformers 5's layers_block_type list), the Mamba2, attention and MLP
// fields that change arithmetic, the fields that must hold one value, the
// fields that do not touch inference (accepted and ignored), and a refusal
// naming any other field. Absent fields take NemotronHConfig's defaults,
// because transformers leaves default values out of the files it saves.
#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "seam/core/status.h"
#include "src/config_fields.h"

namespace seam::weights {

const char* HybridLayerName(HybridLayer kind) {
  switch (kind) {
    case HybridLayer::kMamba: return "mamba";
    case HybridLayer::kAttention: return "attention";
    case HybridLayer::kMlp: return "mlp";
  }
  return "?";
}

HybridLayer ModelConfig::LayerKind(int64_t layer) const {
  const char ch = layer >= 0 && layer < static_cast<int64_t>(hybrid_override_pattern.size())
                      ? hybrid_override_pattern[layer]
                      : '-';
  return ch == 'M' ? HybridLayer::kMamba : ch == '*' ? HybridLayer::kAttention : HybridLayer::kMlp;
}

namespace internal {
namespace {

constexpr char kDefaultPattern[] = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-";
constexpr char kInfinityPlaceholder[] = "\"__seam_infinity__\"";

// Fields that do not change what inference computes: initialisation,
// training-only settings, generation defaults, bookkeeping, and the MoE and
// multi-token-prediction fields (checked separately: only without E layers).
const std::set<std::string>& IgnoredFields() {
  static const std::set<std::string> fields = {
      "architectures", "model_type", "transformers_version", "_name_or_path", "auto_map", "torch_dtype", "dtype",
      "initializer_range", "use_cache", "num_logits_to_keep", "pad_token_id", "attention_dropout", "hidden_dropout",
      "rescale_prenorm_residual", "use_mamba_kernels", "expand", "mamba_expand", "output_attentions",
      "output_hidden_states", "return_dict", "time_step_min", "mamba_dt_min", "time_step_max", "mamba_dt_max",
      "time_step_floor", "mamba_dt_init_floor", "chunk_size", "mamba_chunk_size", "bos_token_id", "eos_token_id",
      "n_routed_experts", "num_local_experts", "n_shared_experts", "moe_intermediate_size",
      "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap", "num_experts_per_tok",
      "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", "mtp_layers_block_type",
      "mtp_hybrid_override_pattern", "num_nextn_predict_layers", "max_position_embeddings"};
  return fields;
}

// Fields seam reads (the arithmetic), or requires to hold one value.
const std::set<std::string>& ReadFields() {
  static const std::set<std::string> fields = {
      "vocab_size", "hidden_size", "num_hidden_layers", "hybrid_override_pattern", "layers_block_type",
      "layer_types", "num_attention_heads", "num_key_value_heads", "head_dim", "attention_head_dim",
      "intermediate_size", "layer_norm_epsilon", "rms_norm_eps", "tie_word_embeddings", "mamba_num_heads",
      "mamba_head_dim", "n_groups", "mamba_n_groups", "ssm_state_size", "conv_kernel", "mamba_d_conv",
      "use_conv_bias", "mamba_conv_bias", "time_step_limit", "mamba_dt_limit", "residual_in_fp32",
      "attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias", "mlp_hidden_act", "mamba_hidden_act",
      "sliding_window", "mamba_ssm_cache_dtype"};
  return fields;
}

// The key a value is stored under: transformers' attribute name, or the
// constructor's name for it (mamba_n_groups for n_groups, ...). Both
// present: they must agree, which the caller checks by reading both.
const char* KeyOf(const Json& j, const char* attribute, const char* constructor) {
  return j.contains(attribute) || !j.contains(constructor) ? attribute : constructor;
}

absl::Status ReadBoth(const Json& j, const char* attribute, const char* constructor, int64_t* out) {
  SEAM_RETURN_IF_ERROR(ReadInt(j, constructor, out, false));
  int64_t first = *out;
  SEAM_RETURN_IF_ERROR(ReadInt(j, attribute, out, false));
  if (j.contains(attribute) && j.contains(constructor) && first != *out) {
    return FieldError(attribute, absl::StrCat("(", *out, ") disagrees with ", constructor, " (", first, ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadString(const Json& j, const std::string& key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return FieldError(key, absl::StrCat("must be a string, got ", it->dump()));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// A float that may be infinite, in any spelling FloatValue reads.
absl::StatusOr<float> LimitValue(const std::string& key, const Json& v) {
  SEAM_ASSIGN_OR_RETURN(const double value, FloatValue(key, v));
  return static_cast<float>(value);
}

absl::Status ReadTimeStepLimit(const Json& j, ModelConfig* c) {
  const char* key = KeyOf(j, "time_step_limit", "mamba_dt_limit");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array() || it->size() != 2) return FieldError(key, absl::StrCat("must be [min, max], got ", it->dump()));
  SEAM_ASSIGN_OR_RETURN(c->time_step_limit_min, LimitValue(key, (*it)[0]));
  SEAM_ASSIGN_OR_RETURN(c->time_step_limit_max, LimitValue(key, (*it)[1]));
  if (!(c->time_step_limit_min >= 0.0f) || !(c->time_step_limit_max >= c->time_step_limit_min)) {
    return FieldError(key, absl::StrCat("must satisfy 0 <= min <= max, got ", it->dump()));
  }
  return absl::OkStatus();
}

absl::StatusOr<char> PatternChar(const std::string& key, const std::string& name) {
  if (name == "M" || name == "mamba" || name == "linear_attention") return 'M';
  if (name == "*" || name == "attention" || name == "full_attention") return '*';
  if (name == "-" || name == "mlp") return '-';
  if (name == "E" || name == "moe") {
    return absl::UnimplementedError(
        absl::StrCat("config.json: field '", key, "': MoE layers (", name, ") of nemotron_h are not supported"));
  }
  return FieldError(key, absl::StrCat("holds an unknown layer type '", name, "' (M/mamba, */attention, -/mlp)"));
}

absl::Status ReadPattern(const Json& j, ModelConfig* c) {
  std::string from_string, from_list;
  const bool has_string = j.contains("hybrid_override_pattern") && !j["hybrid_override_pattern"].is_null();
  if (has_string) {
    std::string text;
    SEAM_RETURN_IF_ERROR(ReadString(j, "hybrid_override_pattern", &text));
    for (char ch : text) {
      SEAM_ASSIGN_OR_RETURN(char kind, PatternChar("hybrid_override_pattern", std::string(1, ch)));
      from_string.push_back(kind);
    }
  }
  for (const char* key : {"layers_block_type", "layer_types"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_array()) return FieldError(key, "must be a list of layer types");
    std::string list;
    for (const Json& v : *it) {
      if (!v.is_string()) return FieldError(key, "must be a list of layer types");
      SEAM_ASSIGN_OR_RETURN(char kind, PatternChar(key, v.get<std::string>()));
      list.push_back(kind);
    }
    if (!from_list.empty() && list != from_list) return FieldError(key, "disagrees with layers_block_type");
    from_list = list;
  }
  if (has_string && !from_list.empty() && from_string != from_list) {
    return FieldError("hybrid_override_pattern", absl::StrCat("'", from_string, "' disagrees with the layer list '",
                                                              from_list, "'"));
  }
  c->hybrid_override_pattern = has_string ? from_string : !from_list.empty() ? from_list : kDefaultPattern;
  if (c->hybrid_override_pattern.empty()) return FieldError("hybrid_override_pattern", "holds no layer");
  const int64_t layers = static_cast<int64_t>(c->hybrid_override_pattern.size());
  c->num_hidden_layers = layers;
  int64_t declared = layers;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &declared, false));
  if (declared != layers) {
    return FieldError("num_hidden_layers", absl::StrCat("(", declared, ") differs from the pattern's ", layers,
                                                        " layers"));
  }
  return absl::OkStatus();
}

// Fields that must hold one value (the only arithmetic seam implements).
absl::Status RequireValues(const Json& j) {
  for (const char* key : {"attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias"}) {
    bool flag = false;
    SEAM_RETURN_IF_ERROR(ReadBool(j, key, &flag));
    if (flag) return absl::UnimplementedError(absl::StrCat("config.json: ", key, "=true is not supported"));
  }
  const std::pair<const char*, std::vector<std::string>> strings[] = {
      {"mlp_hidden_act", {"relu2"}}, {"mamba_hidden_act", {"silu", "swish"}}, {"mamba_ssm_cache_dtype", {"float32"}}};
  for (const auto& [key, allowed] : strings) {
    std::string value = allowed[0];
    SEAM_RETURN_IF_ERROR(ReadString(j, key, &value));
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      return absl::UnimplementedError(absl::StrCat("config.json: ", key, " '", value, "' is not supported"));
    }
  }
  auto window = j.find("sliding_window");
  if (window != j.end() && !window->is_null()) {
    return absl::UnimplementedError(absl::StrCat("config.json: sliding_window ", window->dump(), " is not supported"));
  }
  int64_t mtp = 0;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_nextn_predict_layers", &mtp, false));
  if (mtp != 0) {
    return absl::UnimplementedError(absl::StrCat("config.json: num_nextn_predict_layers=", mtp, " is not supported"));
  }
  for (const auto& [key, value] : j.items()) {
    if (ReadFields().count(key) == 0 && IgnoredFields().count(key) == 0 && !IsInferenceNeutralField(key)) {
      return absl::UnimplementedError(
          absl::StrCat("config.json: field '", key, "' is not supported for nemotron_h"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseNemotronH(const Json& j, ModelConfig* c) {
  SEAM_RETURN_IF_ERROR(RequireValues(j));
  SEAM_RETURN_IF_ERROR(ReadPattern(j, c));
  c->vocab_size = 131072;
  c->hidden_size = 4096;
  c->num_attention_heads = 32;
  c->num_key_value_heads = 8;
  c->head_dim = 128;
  c->intermediate_size = 21504;
  c->max_position_embeddings = 4096;
  c->mamba_num_heads = 128;
  c->mamba_head_dim = 64;
  c->n_groups = 8;
  c->ssm_state_size = 128;
  c->conv_kernel = 4;
  c->chunk_size = 128;
  c->rms_norm_eps = 1e-5f;
  c->bos_token_id = 1;
  c->eos_token_id = 2;
  c->tie_word_embeddings = false;
  const std::pair<const char*, int64_t*> sizes[] = {
      {"vocab_size", &c->vocab_size},           {"hidden_size", &c->hidden_size},
      {"num_attention_heads", &c->num_attention_heads}, {"num_key_value_heads", &c->num_key_value_heads},
      {"intermediate_size", &c->intermediate_size},     {"mamba_num_heads", &c->mamba_num_heads},
      {"mamba_head_dim", &c->mamba_head_dim},           {"ssm_state_size", &c->ssm_state_size},
      {"max_position_embeddings", &c->max_position_embeddings}};
  for (const auto& [key, field] : sizes) {
    SEAM_RETURN_IF_ERROR(ReadInt(j, key, field, false));
    if (*field < 1) return FieldError(key, absl::StrCat("must be at least 1, got ", *field));
  }
  SEAM_RETURN_IF_ERROR(ReadBoth(j, "head_dim", "attention_head_dim", &c->head_dim));
  SEAM_RETURN_IF_ERROR(ReadBoth(j, "n_groups", "mamba_n_groups", &c->n_groups));
  SEAM_RETURN_IF_ERROR(ReadBoth(j, "conv_kernel", "mamba_d_conv", &c->conv_kernel));
  SEAM_RETURN_IF_ERROR(ReadBoth(j, "chunk_size", "mamba_chunk_size", &c->chunk_size));
  const std::pair<const char*, int64_t> positive[] = {
      {"head_dim", c->head_dim}, {"n_groups", c->n_groups}, {"conv_kernel", c->conv_kernel},
      {"chunk_size", c->chunk_size}};
  for (const auto& [key, value] : positive) {
    if (value < 1) return FieldError(key, absl::StrCat("must be at least 1, got ", value));
  }
  if (c->num_attention_heads % c->num_key_value_heads != 0) {
    return FieldError("num_key_value_heads", absl::StrCat("(", c->num_key_value_heads,
                                                          ") must divide num_attention_heads (",
                                                          c->num_attention_heads, ")"));
  }
  if (c->mamba_num_heads % c->n_groups != 0) {
    return FieldError("n_groups", absl::StrCat("(", c->n_groups, ") must divide mamba_num_heads (",
                                               c->mamba_num_heads, ")"));
  }
  if (j.contains("layer_norm_epsilon") || !j.contains("rms_norm_eps")) {
    SEAM_RETURN_IF_ERROR(ReadFloat(j, "layer_norm_epsilon", &c->rms_norm_eps));
  } else {
    SEAM_RETURN_IF_ERROR(ReadFloat(j, "rms_norm_eps", &c->rms_norm_eps));
  }
  if (!(c->rms_norm_eps >= 0.0f)) return FieldError("layer_norm_epsilon", "must be >= 0");
  SEAM_RETURN_IF_ERROR(ReadBool(j, KeyOf(j, "use_conv_bias", "mamba_conv_bias"), &c->use_conv_bias));
  SEAM_RETURN_IF_ERROR(ReadTimeStepLimit(j, c));
  SEAM_RETURN_IF_ERROR(ReadFloat(j, KeyOf(j, "time_step_min", "mamba_dt_min"), &c->time_step_min));
  SEAM_RETURN_IF_ERROR(ReadFloat(j, KeyOf(j, "time_step_max", "mamba_dt_max"), &c->time_step_max));
  SEAM_RETURN_IF_ERROR(ReadFloat(j, KeyOf(j, "time_step_floor", "mamba_dt_init_floor"), &c->time_step_floor));
  SEAM_RETURN_IF_ERROR(ReadBool(j, "residual_in_fp32", &c->residual_in_fp32));
  SEAM_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", &c->tie_word_embeddings));
  SEAM_ASSIGN_OR_RETURN(c->dtype, ReadTorchDType(j));
  SEAM_RETURN_IF_ERROR(ReadTokenId(j, "bos_token_id", &c->bos_token_id));
  SEAM_RETURN_IF_ERROR(ReadTokenId(j, "eos_token_id", &c->eos_token_id));
  return absl::OkStatus();
}

// Keys under the names both transformers 4.x (constructor arguments such as
// attention_head_dim) and 5.x (dataclass fields such as head_dim) read;
// use_mamba_kernels false so neither looks for the optional CUDA kernels.
std::string NemotronHConfigToJson(const ModelConfig& c) {
  Json j;
  j["architectures"] = Json::array({"NemotronHForCausalLM"});
  j["model_type"] = "nemotron_h";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["attention_head_dim"] = c.head_dim;
  j["bos_token_id"] = TokenIdJson(c.bos_token_id);
  j["chunk_size"] = c.chunk_size;
  j["conv_kernel"] = c.conv_kernel;
  j["eos_token_id"] = TokenIdJson(c.eos_token_id);
  j["head_dim"] = c.head_dim;
  j["hidden_dropout"] = 0.0;
  j["hidden_size"] = c.hidden_size;
  j["hybrid_override_pattern"] = c.hybrid_override_pattern;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["layer_norm_epsilon"] = ShortestDecimal(c.rms_norm_eps);
  j["mamba_head_dim"] = c.mamba_head_dim;
  j["mamba_hidden_act"] = "silu";
  j["mamba_num_heads"] = c.mamba_num_heads;
  j["mamba_proj_bias"] = false;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["mlp_bias"] = false;
  j["mlp_hidden_act"] = "relu2";
  j["n_groups"] = c.n_groups;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["pad_token_id"] = 0;
  j["rescale_prenorm_residual"] = true;
  j["residual_in_fp32"] = c.residual_in_fp32;
  j["ssm_state_size"] = c.ssm_state_size;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["time_step_floor"] = ShortestDecimal(c.time_step_floor);
  j["time_step_limit"] = Json::array({ShortestDecimal(c.time_step_limit_min),
                                      std::isinf(c.time_step_limit_max)
                                          ? Json("__seam_infinity__")
                                          : Json(ShortestDecimal(c.time_step_limit_max))});
  j["time_step_max"] = ShortestDecimal(c.time_step_max);
  j["time_step_min"] = ShortestDecimal(c.time_step_min);
  j["torch_dtype"] = TorchDTypeName(c.dtype);
  j["use_bias"] = false;
  j["use_cache"] = true;
  j["use_conv_bias"] = c.use_conv_bias;
  j["use_mamba_kernels"] = false;
  j["vocab_size"] = c.vocab_size;
  // Python's json (what transformers reads it with) spells an infinite float Infinity.
  return absl::StrReplaceAll(j.dump(2), {{kInfinityPlaceholder, "Infinity"}}) + "\n";
}

absl::Status ValidateNemotronHParallel(const ModelConfig& c, int tp, int attn_tp) {
  const std::string& p = c.hybrid_override_pattern;
  auto has = [&p](char ch) { return p.find(ch) != std::string::npos; };
  const std::pair<const char*, int64_t> attention[] = {{"num_attention_heads", c.num_attention_heads},
                                                       {"num_key_value_heads", c.num_key_value_heads}};
  const std::pair<const char*, int64_t> mamba[] = {{"mamba_num_heads", c.mamba_num_heads},
                                                   {"n_groups", c.n_groups}};
  if (has('*')) {
    for (const auto& [key, value] : attention) {
      if (value % attn_tp != 0) {
        return absl::InvalidArgumentError(absl::StrCat(key, " (", value, ") does not divide over attention TP ",
                                                       attn_tp, " (attention layers)"));
      }
    }
  }
  if (has('M')) {
    for (const auto& [key, value] : mamba) {
      if (value % attn_tp != 0) {
        return absl::InvalidArgumentError(absl::StrCat(key, " (", value, ") does not divide over attention TP ",
                                                       attn_tp, " (Mamba layers: heads and groups are sharded)"));
      }
    }
  }
  if (has('-') && c.intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("intermediate_size (", c.intermediate_size,
                                                   ") does not divide over TP ", tp, " (MLP layers)"));
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace seam::weights

// longcat_flash's config.json (LongcatFlashConfig of transformers 5): the MLA,
// MoE and dense-path fields that change arithmetic, the fields that must hold
// one value (no attention bias, no router bias, identity zero experts, the
// default rotary embedding), the fields that do not touch inference, and a
// refusal naming any other field. Absent fields take LongcatFlashConfig's
// defaults, because transformers leaves default values out of what it saves.
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "src/config_fields.h"

namespace seam::weights::internal {
namespace {

// Fields seam reads, or requires to hold one value.
const std::set<std::string>& ReadFields() {
  static const std::set<std::string> fields = {
      "vocab_size", "hidden_size", "num_hidden_layers", "num_layers", "num_attention_heads", "num_key_value_heads",
      "hidden_act", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "rope_parameters",
      "rope_theta", "rope_scaling", "attention_bias", "ffn_hidden_size", "intermediate_size", "q_lora_rank",
      "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "head_dim", "v_head_dim", "qk_head_dim", "moe_topk",
      "num_experts_per_tok", "n_routed_experts", "num_local_experts", "zero_expert_num", "expert_ffn_hidden_size",
      "routed_scaling_factor", "router_bias", "zero_expert_type", "mla_scale_q_lora", "mla_scale_kv_lora"};
  return fields;
}

// Fields that do not change what inference computes.
const std::set<std::string>& IgnoredFields() {
  static const std::set<std::string> fields = {"initializer_range", "use_cache", "attention_dropout",
                                               "num_nextn_predict_layers", "attention_method"};
  return fields;
}

absl::Status Unsupported(const std::string& what) {
  return absl::UnimplementedError(absl::StrCat("config.json: ", what, " is not supported for longcat_flash"));
}

// rope_theta inside rope_parameters (transformers 5) or at the top level
// (earlier files); only the default rotary embedding is implemented.
absl::Status ReadLongcatRope(const Json& j, float* theta) {
  auto scaling = j.find("rope_scaling");
  if (scaling != j.end() && !scaling->is_null()) return Unsupported(absl::StrCat("rope_scaling ", scaling->dump()));
  auto it = j.find("rope_parameters");
  if (it == j.end() || it->is_null()) return ReadFloat(j, "rope_theta", theta);
  if (!it->is_object()) return FieldError("rope_parameters", "must be an object");
  auto type = it->find("rope_type");
  if (type != it->end() && *type != "default") return Unsupported(absl::StrCat("rope_parameters ", it->dump()));
  for (const auto& [key, value] : it->items()) {
    if (key != "rope_type" && key != "rope_theta") {
      return Unsupported(absl::StrCat("field 'rope_parameters.", key, "' (", value.dump(), ")"));
    }
  }
  return ReadFloat(*it, "rope_theta", theta);
}

// A field that transformers reads under two names (attribute_map): both
// present must agree.
absl::Status ReadAliased(const Json& j, const char* name, const char* alias, int64_t* out) {
  SEAM_RETURN_IF_ERROR(ReadInt(j, alias, out, false));
  const int64_t first = *out;
  SEAM_RETURN_IF_ERROR(ReadInt(j, name, out, false));
  if (j.contains(name) && j.contains(alias) && first != *out) {
    return FieldError(name, absl::StrCat("(", *out, ") disagrees with ", alias, " (", first, ")"));
  }
  return absl::OkStatus();
}

absl::Status RefuseValues(const Json& j) {
  for (const auto& [key, value] : j.items()) {
    if (ReadFields().count(key) == 0 && IgnoredFields().count(key) == 0 && !IsInferenceNeutralField(key)) {
      return Unsupported(absl::StrCat("field '", key, "'"));
    }
  }
  for (const char* key : {"attention_bias", "router_bias"}) {
    bool flag = false;
    SEAM_RETURN_IF_ERROR(ReadBool(j, key, &flag));
    if (flag) return Unsupported(absl::StrCat(key, "=true"));
  }
  for (const char* key : {"mla_scale_q_lora", "mla_scale_kv_lora"}) {  // transformers always scales
    bool flag = true;
    SEAM_RETURN_IF_ERROR(ReadBool(j, key, &flag));
    if (!flag) return Unsupported(absl::StrCat(key, "=false"));
  }
  auto it = j.find("hidden_act");
  if (it != j.end() && !it->is_null() && *it != "silu" && *it != "swish") {
    return Unsupported(absl::StrCat("hidden_act ", it->dump(), " (silu only)"));
  }
  it = j.find("zero_expert_type");
  if (it != j.end() && !it->is_null() && *it != "identity") {
    return Unsupported(absl::StrCat("zero_expert_type ", it->dump(), " (identity only)"));
  }
  it = j.find("q_lora_rank");
  if (it != j.end() && it->is_null()) return Unsupported("q_lora_rank=null (a full-rank q_proj)");
  return absl::OkStatus();
}

// The sizes and the relations between them that transformers' modules assume.
absl::Status CheckLongcat(const Json& j, int64_t layers, ModelConfig* c) {
  c->num_hidden_layers = layers;
  c->norm_topk_prob = false;  // the routing weights are not renormalised
  const std::pair<const char*, int64_t> sizes[] = {
      {"num_layers", layers},
      {"vocab_size", c->vocab_size},
      {"hidden_size", c->hidden_size},
      {"num_attention_heads", c->num_attention_heads},
      {"ffn_hidden_size", c->intermediate_size},
      {"q_lora_rank", c->q_lora_rank},
      {"kv_lora_rank", c->kv_lora_rank},
      {"qk_nope_head_dim", c->qk_nope_head_dim},
      {"qk_rope_head_dim", c->qk_rope_head_dim},
      {"v_head_dim", c->v_head_dim},
      {"n_routed_experts", c->num_experts},
      {"moe_topk", c->num_experts_per_tok},
      {"expert_ffn_hidden_size", c->moe_intermediate_size}};
  for (const auto& [key, value] : sizes) {
    if (value < 1) return FieldError(key, absl::StrCat("must be at least 1, got ", value));
  }
  if (c->zero_expert_num < 0) return FieldError("zero_expert_num", "must be at least 0");
  if (c->num_experts_per_tok > c->num_experts + c->zero_expert_num) {
    return FieldError("moe_topk", absl::StrCat("(", c->num_experts_per_tok, ") exceeds n_routed_experts + ",
                                               "zero_expert_num (", c->num_experts + c->zero_expert_num, ")"));
  }
  int64_t declared = 2 * layers;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &declared, false));
  if (declared != 2 * layers) {
    return FieldError("num_hidden_layers", absl::StrCat("(", declared, ") must be twice num_layers (", layers,
                                                        "): one per attention"));
  }
  if (c->num_key_value_heads != c->num_attention_heads) {
    return Unsupported(absl::StrCat("num_key_value_heads ", c->num_key_value_heads, " other than num_attention_heads ",
                                    c->num_attention_heads));
  }
  if (c->head_dim != c->qk_rope_head_dim) {
    return Unsupported(absl::StrCat("head_dim ", c->head_dim, " other than qk_rope_head_dim ", c->qk_rope_head_dim,
                                    " (the rotary dimension)"));
  }
  if (c->qk_rope_head_dim % 2 != 0) return FieldError("qk_rope_head_dim", "must be even");
  int64_t qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "qk_head_dim", &qk_head_dim, false));
  if (qk_head_dim != c->qk_nope_head_dim + c->qk_rope_head_dim) {
    return Unsupported(absl::StrCat("qk_head_dim ", qk_head_dim, " other than qk_nope_head_dim + qk_rope_head_dim"));
  }
  if (!(c->rms_norm_eps >= 0.0f)) return FieldError("rms_norm_eps", "must be >= 0");
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseLongcatFlash(const Json& j, ModelConfig* c) {
  SEAM_RETURN_IF_ERROR(RefuseValues(j));
  // LongcatFlashConfig's defaults for the fields a saved file may leave out.
  c->vocab_size = 131072, c->hidden_size = 6144, c->num_attention_heads = 64;
  c->intermediate_size = 12288, c->q_lora_rank = 1536, c->kv_lora_rank = 512;
  c->qk_nope_head_dim = 128, c->qk_rope_head_dim = 64, c->v_head_dim = 128, c->head_dim = 64;
  c->num_experts_per_tok = 12, c->num_experts = 512, c->zero_expert_num = 256, c->moe_intermediate_size = 2048;
  c->routed_scaling_factor = 6.0f, c->rms_norm_eps = 1e-5f, c->rope_theta = 10000000.0f;
  c->max_position_embeddings = 131072, c->tie_word_embeddings = false;
  c->bos_token_id = 1, c->eos_token_id = 2;
  int64_t layers = 28;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_layers", &layers, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c->vocab_size, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "hidden_size", &c->hidden_size, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_attention_heads", &c->num_attention_heads, false));
  c->num_key_value_heads = c->num_attention_heads;
  SEAM_RETURN_IF_ERROR(ReadInt(j, "num_key_value_heads", &c->num_key_value_heads, false));
  SEAM_RETURN_IF_ERROR(ReadAliased(j, "ffn_hidden_size", "intermediate_size", &c->intermediate_size));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "q_lora_rank", &c->q_lora_rank, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "kv_lora_rank", &c->kv_lora_rank, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "qk_nope_head_dim", &c->qk_nope_head_dim, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "qk_rope_head_dim", &c->qk_rope_head_dim, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "v_head_dim", &c->v_head_dim, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "head_dim", &c->head_dim, false));
  SEAM_RETURN_IF_ERROR(ReadAliased(j, "moe_topk", "num_experts_per_tok", &c->num_experts_per_tok));
  SEAM_RETURN_IF_ERROR(ReadAliased(j, "n_routed_experts", "num_local_experts", &c->num_experts));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "zero_expert_num", &c->zero_expert_num, false));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "expert_ffn_hidden_size", &c->moe_intermediate_size, false));
  SEAM_RETURN_IF_ERROR(ReadFloat(j, "routed_scaling_factor", &c->routed_scaling_factor));
  SEAM_RETURN_IF_ERROR(ReadFloat(j, "rms_norm_eps", &c->rms_norm_eps));
  SEAM_RETURN_IF_ERROR(ReadLongcatRope(j, &c->rope_theta));
  SEAM_RETURN_IF_ERROR(ReadInt(j, "max_position_embeddings", &c->max_position_embeddings, false));
  SEAM_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", &c->tie_word_embeddings));
  SEAM_ASSIGN_OR_RETURN(c->dtype, ReadTorchDType(j));
  SEAM_RETURN_IF_ERROR(ReadTokenId(j, "bos_token_id", &c->bos_token_id));
  SEAM_RETURN_IF_ERROR(ReadTokenId(j, "eos_token_id", &c->eos_token_id));
  return CheckLongcat(j, layers, c);
}

std::string LongcatFlashConfigToJson(const ModelConfig& c) {
  Json j;
  j["architectures"] = Json::array({"LongcatFlashForCausalLM"});
  j["model_type"] = "longcat_flash";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = TokenIdJson(c.bos_token_id);
  j["eos_token_id"] = TokenIdJson(c.eos_token_id);
  j["dtype"] = TorchDTypeName(c.dtype);
  j["expert_ffn_hidden_size"] = c.moe_intermediate_size;
  j["ffn_hidden_size"] = c.intermediate_size;
  j["head_dim"] = c.qk_rope_head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["moe_topk"] = c.num_experts_per_tok;
  j["n_routed_experts"] = c.num_experts;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = 2 * c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_attention_heads;
  j["num_layers"] = c.num_hidden_layers;
  j["q_lora_rank"] = c.q_lora_rank;
  j["qk_head_dim"] = c.qk_nope_head_dim + c.qk_rope_head_dim;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["rms_norm_eps"] = ShortestDecimal(c.rms_norm_eps);
  j["rope_parameters"] = {{"rope_theta", ShortestDecimal(c.rope_theta)}, {"rope_type", "default"}};
  j["routed_scaling_factor"] = ShortestDecimal(c.routed_scaling_factor);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["transformers_version"] = "5.0.0";
  j["use_cache"] = true;
  j["v_head_dim"] = c.v_head_dim;
  j["vocab_size"] = c.vocab_size;
  j["zero_expert_num"] = c.zero_expert_num;
  return j.dump(2) + "\n";
}

absl::Status ValidateLongcatFlashParallel(const ModelConfig& c, int tp, int attn_tp) {
  if (c.num_attention_heads % attn_tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_attention_heads (", c.num_attention_heads,
                                                   ") does not divide over attention TP ", attn_tp));
  }
  if (c.intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ffn_hidden_size (", c.intermediate_size,
                                                   ") does not divide over TP ", tp, " (dense MLPs)"));
  }
  if (c.moe_intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert_ffn_hidden_size (", c.moe_intermediate_size,
                                                   ") does not divide over TP ", tp, " (MoE experts)"));
  }
  return absl::OkStatus();
}

}  // namespace seam::weights::internal

// HfTensorLayout: the tensor names and shapes of transformers' Qwen3,
// Qwen3-MoE, Nemotron-H and LongCat-Flash modules (modeling_qwen3.py,
// modeling_qwen3_moe.py, modeling_nemotron_h.py, modeling_longcat_flash.py).
#include "seam/weights/tensor_layout.h"

#include "absl/strings/str_cat.h"

namespace seam::weights {
namespace {

// One pre-norm block per pattern character: norm, then its mixer (Mamba2,
// attention without rotary embedding, or the squared-ReLU MLP).
std::vector<TensorSpec> NemotronHLayout(const ModelConfig& c) {
  const int64_t H = c.hidden_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = c.num_attention_heads * D, KV = c.num_key_value_heads * D;
  const int64_t I = c.mamba_intermediate(), conv = c.mamba_conv_dim(), heads = c.mamba_num_heads;
  const std::string b = kNemotronHPrefix;
  std::vector<TensorSpec> out;
  out.push_back({b + "embeddings.weight", {V, H}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = absl::StrCat(b, "layers.", l, ".");
    out.push_back({p + "norm.weight", {H}, true});
    const std::string m = p + "mixer.";
    switch (c.LayerKind(l)) {
      case HybridLayer::kMamba:
        out.push_back({m + "in_proj.weight", {I + conv + heads, H}});
        out.push_back({m + "conv1d.weight", {conv, 1, c.conv_kernel}});
        if (c.use_conv_bias) out.push_back({m + "conv1d.bias", {conv}});
        out.push_back({m + "dt_bias", {heads}, false, TensorInit::kMambaDt});
        out.push_back({m + "A_log", {heads}, false, TensorInit::kMambaA});
        out.push_back({m + "D", {heads}, true});
        out.push_back({m + "norm.weight", {I}, true});
        out.push_back({m + "out_proj.weight", {H, I}});
        break;
      case HybridLayer::kAttention:
        out.push_back({m + "q_proj.weight", {Q, H}});
        out.push_back({m + "k_proj.weight", {KV, H}});
        out.push_back({m + "v_proj.weight", {KV, H}});
        out.push_back({m + "o_proj.weight", {H, Q}});
        break;
      case HybridLayer::kMlp:
        out.push_back({m + "up_proj.weight", {c.intermediate_size, H}});
        out.push_back({m + "down_proj.weight", {H, c.intermediate_size}});
        break;
    }
  }
  out.push_back({b + "norm_f.weight", {H}, true});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, H}});
  return out;
}

// Per logical layer: two MLA attentions and two dense MLPs (each with its
// pre-norm) and the shortcut MoE: router (classifier over routed and zero
// experts, with the score-correction bias) and the routed experts, one
// module each (the zero experts have no weights).
std::vector<TensorSpec> LongcatFlashLayout(const ModelConfig& c) {
  const int64_t H = c.hidden_size, V = c.vocab_size, heads = c.num_attention_heads;
  const int64_t qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {V, H}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    for (int i = 0; i < 2; ++i) {
      const std::string a = absl::StrCat(p, "self_attn.", i, ".");
      out.push_back({absl::StrCat(p, "input_layernorm.", i, ".weight"), {H}, true});
      out.push_back({a + "q_a_proj.weight", {c.q_lora_rank, H}});
      out.push_back({a + "q_a_layernorm.weight", {c.q_lora_rank}, true});
      out.push_back({a + "q_b_proj.weight", {heads * qk, c.q_lora_rank}});
      out.push_back({a + "kv_a_proj_with_mqa.weight", {c.kv_lora_rank + c.qk_rope_head_dim, H}});
      out.push_back({a + "kv_a_layernorm.weight", {c.kv_lora_rank}, true});
      out.push_back({a + "kv_b_proj.weight", {heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}});
      out.push_back({a + "o_proj.weight", {H, heads * c.v_head_dim}});
      out.push_back({absl::StrCat(p, "post_attention_layernorm.", i, ".weight"), {H}, true});
      const std::string m = absl::StrCat(p, "mlps.", i, ".");
      out.push_back({m + "gate_proj.weight", {c.intermediate_size, H}});
      out.push_back({m + "up_proj.weight", {c.intermediate_size, H}});
      out.push_back({m + "down_proj.weight", {H, c.intermediate_size}});
    }
    const int64_t all = c.num_experts + c.zero_expert_num, M = c.moe_intermediate_size;
    out.push_back({p + "mlp.router.classifier.weight", {all, H}});
    out.push_back({p + "mlp.router.e_score_correction_bias", {all}});
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string x = absl::StrCat(p, "mlp.experts.", e, ".");
      out.push_back({x + "gate_proj.weight", {M, H}});
      out.push_back({x + "up_proj.weight", {M, H}});
      out.push_back({x + "down_proj.weight", {H, M}});
    }
  }
  out.push_back({"model.norm.weight", {H}, true});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, H}});
  return out;
}

}  // namespace

std::vector<TensorSpec> HfTensorLayout(const ModelConfig& c) {
  if (c.is_nemotron_h()) return NemotronHLayout(c);
  if (c.is_longcat_flash()) return LongcatFlashLayout(c);
  const int64_t H = c.hidden_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = c.num_attention_heads * D, KV = c.num_key_value_heads * D;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {V, H}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    out.push_back({p + "input_layernorm.weight", {H}, true});
    out.push_back({p + "self_attn.q_proj.weight", {Q, H}});
    out.push_back({p + "self_attn.k_proj.weight", {KV, H}});
    out.push_back({p + "self_attn.v_proj.weight", {KV, H}});
    out.push_back({p + "self_attn.o_proj.weight", {H, Q}});
    out.push_back({p + "self_attn.q_norm.weight", {D}, true});
    out.push_back({p + "self_attn.k_norm.weight", {D}, true});
    out.push_back({p + "post_attention_layernorm.weight", {H}, true});
    if (c.IsSparseLayer(l)) {
      const int64_t M = c.moe_intermediate_size;
      out.push_back({p + "mlp.gate.weight", {c.num_experts, H}});
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = absl::StrCat(p, "mlp.experts.", e, ".");
        out.push_back({x + "gate_proj.weight", {M, H}});
        out.push_back({x + "up_proj.weight", {M, H}});
        out.push_back({x + "down_proj.weight", {H, M}});
      }
    } else {
      const int64_t I = c.intermediate_size;
      out.push_back({p + "mlp.gate_proj.weight", {I, H}});
      out.push_back({p + "mlp.up_proj.weight", {I, H}});
      out.push_back({p + "mlp.down_proj.weight", {H, I}});
    }
  }
  out.push_back({"model.norm.weight", {H}, true});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, H}});
  return out;
}

}  // namespace seam::weights

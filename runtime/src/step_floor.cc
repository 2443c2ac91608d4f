// step_floor.h: bytes and FLOPs from the checkpoint's tensor layout.
#include "seam/runtime/step_floor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "seam/weights/tensor_layout.h"

namespace seam::runtime {
namespace {

using weights::HybridLayer;
using weights::ModelConfig;
using weights::TensorSpec;

// How one rank holds a tensor.
enum class Split { kWhole, kTp, kAttnTp };

// Where a tensor belongs: its layer (-1 outside the decoder layers) and role.
struct TensorRole {
  int64_t layer = -1;
  bool embedding = false, final_norm = false, lm_head = false, expert = false, fp32 = false;
  Split split = Split::kWhole;
};

int64_t LayerOf(const std::string& name) {
  const size_t at = name.find("layers.");
  if (at == std::string::npos) return -1;
  const size_t begin = at + 7, end = name.find('.', begin);
  int64_t layer = -1;
  return absl::SimpleAtoi(name.substr(begin, end - begin), &layer) ? layer : -1;
}

bool IsAttentionLayer(const ModelConfig& c, int64_t layer) {
  return !c.is_nemotron_h() || c.LayerKind(layer) == HybridLayer::kAttention;
}

TensorRole RoleOf(const ModelConfig& c, const TensorSpec& spec) {
  TensorRole r;
  const std::string& n = spec.name;
  r.layer = LayerOf(n);
  if (r.layer < 0) {
    r.embedding = absl::StrContains(n, "embed");
    r.lm_head = n == "lm_head.weight";
    r.final_norm = !r.embedding && !r.lm_head;
    r.split = r.lm_head ? Split::kTp : Split::kWhole;
    return r;
  }
  // Mamba's conv taps and bias, dt_bias, A and D are kept in fp32 whatever the dtype.
  r.fp32 = absl::StrContains(n, "conv1d.") || absl::EndsWith(n, ".dt_bias") || absl::EndsWith(n, ".A_log") ||
           absl::EndsWith(n, ".D");
  r.expert = absl::StrContains(n, ".mlp.experts.");
  // Vectors and the routers (Qwen3-MoE's gate, LongCat-Flash's classifier) are read whole.
  if (spec.shape.size() < 2 || absl::EndsWith(n, ".mlp.gate.weight") || absl::StrContains(n, ".mlp.router.")) {
    return r;
  }
  const bool attention_side = absl::StrContains(n, ".self_attn.") ||
                              (c.is_nemotron_h() && c.LayerKind(r.layer) != HybridLayer::kMlp);
  r.split = attention_side ? Split::kAttnTp : Split::kTp;
  return r;
}

int64_t EndLayer(const ModelConfig& c, const StepFloorOptions& o) {
  return o.end_layer < 0 ? c.num_hidden_layers : std::min(o.end_layer, c.num_hidden_layers);
}

double AttnTp(const StepFloorOptions& o) { return std::max(1, o.tp / std::max(1, o.attn_dp)); }

double SplitShare(Split s, const StepFloorOptions& o) {
  switch (s) {
    case Split::kWhole: return 1.0;
    case Split::kTp: return 1.0 / std::max(1, o.tp);
    case Split::kAttnTp: return 1.0 / AttnTp(o);
  }
  return 1.0;
}

int64_t AttentionLayers(const ModelConfig& c, int64_t first, int64_t end) {
  int64_t layers = 0;
  for (int64_t l = first; l < end; ++l) layers += IsAttentionLayer(c, l) ? 1 : 0;
  return layers;
}

int64_t MambaLayers(const ModelConfig& c, int64_t first, int64_t end) {
  int64_t layers = 0;
  for (int64_t l = first; l < end && c.is_nemotron_h(); ++l) layers += c.LayerKind(l) == HybridLayer::kMamba ? 1 : 0;
  return layers;
}

}  // namespace

double ExpectedExpertsTouched(int64_t experts, int64_t top_k, int64_t rows) {
  if (experts <= 0 || top_k <= 0 || rows <= 0) return 0;
  const double e = static_cast<double>(experts), k = std::min(static_cast<double>(top_k), e);
  return e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(rows)));
}

double ExpectedRoutedExpertsTouched(int64_t experts, int64_t zero_experts, int64_t top_k, int64_t rows) {
  if (experts <= 0 || top_k <= 0 || rows <= 0) return 0;
  const double e = static_cast<double>(experts), all = e + static_cast<double>(std::max<int64_t>(0, zero_experts));
  const double k = std::min(static_cast<double>(top_k), all);
  return e * (1.0 - std::pow(1.0 - k / all, static_cast<double>(rows)));
}

StepFloor StepFloor::Of(const ModelConfig& c, const StepFloorOptions& o) {
  StepFloor f;
  f.options_ = o;
  f.experts_ = c.num_experts;
  f.zero_experts_ = c.zero_expert_num;
  f.top_k_ = c.num_experts_per_tok;
  const int64_t end = EndLayer(c, o);
  const bool first_stage = o.first_layer == 0, last_stage = end == c.num_hidden_layers;
  const double tp = std::max(1, o.tp), top_k_share =
      c.num_experts > 0 ? std::min(1.0, double(f.top_k_) / double(f.experts_ + f.zero_experts_)) : 0;
  for (const TensorSpec& spec : weights::HfTensorLayout(c)) {
    const TensorRole role = RoleOf(c, spec);
    const double elements = static_cast<double>(NumElements(spec.shape));
    const double element_bytes = role.fp32 ? 4.0 : static_cast<double>(DTypeSize(o.weight_dtype));
    const double share = SplitShare(role.split, o);
    const bool matrix = spec.shape.size() == 2;
    if (role.embedding) {  // tied: the lm_head reads the table whole (over TP); else one row per token
      if (first_stage && !c.tie_word_embeddings) f.embedding_row_bytes_ = double(c.hidden_size) * element_bytes;
      if (last_stage && c.tie_word_embeddings) {
        f.dense_bytes_ += elements * element_bytes / tp;
        f.prefill_last_row_params_ += elements / tp;
      }
      continue;
    }
    if (role.layer < 0) {  // the final norm and the lm_head
      if (!last_stage) continue;
      f.dense_bytes_ += elements * element_bytes * share;
      if (role.lm_head) f.prefill_last_row_params_ += elements / tp;
      continue;
    }
    if (role.layer < o.first_layer || role.layer >= end) continue;
    (role.expert ? f.all_expert_bytes_ : f.dense_bytes_) += elements * element_bytes * share;
    if (matrix) f.prefill_params_per_token_ += elements * (role.split == Split::kWhole ? 1.0 : 1.0 / tp) *
                                               (role.expert ? top_k_share : 1.0);
  }
  const int64_t attn_tp = static_cast<int64_t>(AttnTp(o));
  const double kv_heads = static_cast<double>((c.num_key_value_heads + attn_tp - 1) / attn_tp);
  const double attention_layers = static_cast<double>(AttentionLayers(c, o.first_layer, end));
  f.kv_per_token_ = attention_layers * 2.0 * kv_heads * double(c.head_dim) * double(DTypeSize(o.cache_dtype));
  const double state_per_layer = (c.conv_kernel - 1.0) * double(c.mamba_conv_dim()) +
                                 double(c.mamba_num_heads) * double(c.mamba_head_dim) * double(c.ssm_state_size);
  f.state_per_sequence_ = 4.0 * double(MambaLayers(c, o.first_layer, end)) * state_per_layer / AttnTp(o);
  f.attention_flops_per_pair_ = 4.0 * double(c.num_attention_heads) * double(c.head_dim) * attention_layers / tp;
  if (c.is_longcat_flash()) {
    // Two MLA attentions per layer over a latent cache: one row of Dc + Dr
    // per token on every rank; absorbed, a pair costs Dc + Dr for the score
    // and Dc for the output per head.
    const double mla_layers = 2.0 * double(end - o.first_layer), row = double(c.kv_lora_rank + c.qk_rope_head_dim);
    f.kv_per_token_ = mla_layers * row * double(DTypeSize(o.cache_dtype));
    f.attention_flops_per_pair_ =
        2.0 * double(c.num_attention_heads) * (row + double(c.kv_lora_rank)) * mla_layers / tp;
  }
  return f;
}

DecodeStepBytes StepFloor::DecodeStep(int64_t batch, int64_t context_tokens) const {
  DecodeStepBytes out;
  const double b = static_cast<double>(batch), dp = std::max(1, options_.attn_dp);
  const double touched =
      experts_ > 0 ? ExpectedRoutedExpertsTouched(experts_, zero_experts_, top_k_, batch) / double(experts_) : 0.0;
  out.experts = all_expert_bytes_ * touched;
  out.weights = dense_bytes_ + out.experts + embedding_row_bytes_ * b;
  out.kv = kv_per_token_ * static_cast<double>(context_tokens + batch) / dp;
  out.state = 2.0 * state_per_sequence_ * b / dp;
  return out;
}

PrefillFlops StepFloor::Prefill(int64_t tokens, int64_t cached_tokens) const {
  PrefillFlops out;
  if (tokens <= 0) return out;
  const double t = static_cast<double>(tokens);
  out.matmul = 2.0 * prefill_params_per_token_ * t + 2.0 * prefill_last_row_params_;
  out.attention = attention_flops_per_pair_ * (t * static_cast<double>(cached_tokens) + t * (t + 1.0) / 2.0);
  return out;
}

}  // namespace seam::runtime

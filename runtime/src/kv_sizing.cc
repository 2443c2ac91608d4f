// KV cache budgets from memory (see kv_sizing.h).
#include "seam/runtime/kv_sizing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seam::runtime {

int64_t ActivationReserveBytes(const weights::ModelConfig& c, int tp, int attn_tp, DType dtype, int64_t tokens) {
  const int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  int64_t qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim / attn_tp;
  int64_t attn_out = c.num_attention_heads * c.head_dim / attn_tp;
  if (c.is_longcat_flash()) {  // MLA: q (nope | rope), q_lat, the latent row; o_lat and o per head
    const int64_t heads = c.num_attention_heads / attn_tp, row = c.kv_lora_rank + c.qk_rope_head_dim;
    qkv = c.q_lora_rank + heads * (c.qk_nope_head_dim + c.qk_rope_head_dim + row) + row;
    attn_out = heads * (c.kv_lora_rank + c.v_head_dim);
  }
  int64_t ffn = 3 * c.intermediate_size / tp;
  if (c.num_experts > 0) ffn = std::max(ffn, 3 * c.num_experts_per_tok * c.moe_intermediate_size / tp);
  // hidden, residual, normed input, attention output and the pending sum: 6 rows of hidden.
  const int64_t per_token = bytes * (6 * c.hidden_size + qkv + attn_out + ffn) + int64_t{4} * c.vocab_size;
  return tokens * per_token + (int64_t{256} << 20);
}

absl::StatusOr<int64_t> KvBudgetBytes(const KvSizing& sizing, Device device, int64_t used_bytes,
                                      int64_t total_bytes, int64_t free_bytes, int64_t activation_reserve_bytes) {
  if (device.is_cpu() || !sizing.from_gpu_memory) {
    if (sizing.cache_bytes <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("the KV cache budget must be positive, got ", sizing.cache_bytes));
    }
    return sizing.cache_bytes;
  }
  if (!(sizing.memory_fraction > 0.0 && sizing.memory_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the KV memory fraction must be in (0, 1], got %g", sizing.memory_fraction));
  }
  const int64_t allowed = static_cast<int64_t>(sizing.memory_fraction * static_cast<double>(total_bytes));
  // Never more than is free now, less the reserve the next steps need.
  const int64_t budget =
      std::min(allowed - used_bytes - activation_reserve_bytes, free_bytes - activation_reserve_bytes);
  if (budget <= 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no GPU memory left for the KV cache on %s: %.2f x %s = %s may be used, this process holds %s, the "
        "activations of a step need %s and %s are free; raise --kv-memory-fraction, lower --max-step-tokens or "
        "use more GPUs",
        device.ToString(), sizing.memory_fraction, FormatBytes(total_bytes), FormatBytes(allowed),
        FormatBytes(used_bytes), FormatBytes(activation_reserve_bytes), FormatBytes(free_bytes)));
  }
  return budget;
}

int64_t LoadedBytes(int64_t gpu_lost, int64_t pool_grew) {
  return std::min(gpu_lost, pool_grew + (int64_t{1} << 30));
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= double(int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", b / double(int64_t{1} << 30));
  if (b >= double(int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", b / double(int64_t{1} << 20));
  return absl::StrFormat("%d bytes", bytes);
}

}  // namespace seam::runtime

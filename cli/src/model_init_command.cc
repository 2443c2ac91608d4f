// `seam model init`: flags -> ModelConfig -> WriteRandomCheckpoint, then a
// summary of what was written (files, tensors, parameters).
#include "model_init_command.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "command_status.h"
#include "seam/weights/model_config.h"
#include "seam/weights/random_checkpoint.h"
#include "seam/weights/tensor_layout.h"

namespace seam::cli {
namespace {

std::string CheckNemotronH(const ModelInitCommandOptions& o) {
  if (o.experts != 0 || o.top_k != 0 || o.moe_intermediate != 0) {
    return "--experts, --top-k and --moe-intermediate apply only to --arch qwen3_moe";
  }
  if (static_cast<int64_t>(o.pattern.size()) != o.layers) {
    return absl::StrCat("--pattern '", o.pattern, "' must have one character per layer (--layers ", o.layers, ")");
  }
  if (o.pattern.find_first_not_of("M*-") != std::string::npos) {
    return absl::StrCat("--pattern '", o.pattern, "' may hold only M (Mamba2), * (attention) and - (MLP)");
  }
  const std::pair<const char*, int64_t> sizes[] = {{"--mamba-heads", o.mamba_heads},
                                                   {"--mamba-head-dim", o.mamba_head_dim},
                                                   {"--groups", o.groups},
                                                   {"--state", o.state},
                                                   {"--conv-kernel", o.conv_kernel},
                                                   {"--chunk", o.chunk}};
  for (const auto& [flag, value] : sizes) {
    if (value < 1) return absl::StrCat(flag, " must be at least 1 for nemotron_h, got ", value);
  }
  if (o.mamba_heads % o.groups != 0) {
    return absl::StrCat("--groups ", o.groups, " does not divide --mamba-heads ", o.mamba_heads);
  }
  return {};
}

bool IsLongcat(const std::string& arch) { return arch == "longcat_flash" || arch == "longcat"; }

std::string CheckLongcat(const ModelInitCommandOptions& o) {
  if (o.head_dim != 0) return "--head-dim does not apply to longcat_flash (its rotary dimension is --rope-dim)";
  if (o.kv_heads != 0 && o.kv_heads != o.heads) return "--kv-heads must equal --heads for longcat_flash (MLA)";
  const std::pair<const char*, int64_t> sizes[] = {
      {"--experts", o.experts},       {"--top-k", o.top_k},           {"--moe-intermediate", o.moe_intermediate},
      {"--q-lora-rank", o.q_lora_rank}, {"--kv-lora-rank", o.kv_lora_rank}, {"--nope-dim", o.nope_dim},
      {"--rope-dim", o.rope_dim},     {"--v-head-dim", o.v_head_dim}};
  for (const auto& [flag, value] : sizes) {
    if (value < 1) return absl::StrCat(flag, " must be at least 1 for longcat_flash, got ", value);
  }
  if (o.zero_experts < 0) return absl::StrCat("--zero-experts must be at least 0, got ", o.zero_experts);
  if (o.top_k > o.experts + o.zero_experts) {
    return absl::StrCat("--top-k ", o.top_k, " exceeds --experts + --zero-experts (", o.experts + o.zero_experts, ")");
  }
  if (o.rope_dim % 2 != 0) return absl::StrCat("--rope-dim must be even, got ", o.rope_dim);
  if (!(o.routed_scaling > 0.0)) return absl::StrCat("--routed-scaling must be positive, got ", o.routed_scaling);
  return {};
}

// Empty when the options are usable; otherwise the message naming the bad flag.
std::string CheckArguments(const ModelInitCommandOptions& o) {
  if (o.arch != "qwen3" && o.arch != "qwen3_moe" && o.arch != "nemotron_h" && !IsLongcat(o.arch)) {
    return absl::StrCat("--arch must be qwen3, qwen3_moe, nemotron_h or longcat_flash, got '", o.arch, "'");
  }
  const bool mla_flags = o.zero_experts != 0 || o.q_lora_rank != 0 || o.kv_lora_rank != 0 || o.nope_dim != 0 ||
                         o.rope_dim != 0 || o.v_head_dim != 0 || o.routed_scaling != 1.0;
  if (!IsLongcat(o.arch) && mla_flags) {
    return "--zero-experts, --routed-scaling, --q-lora-rank, --kv-lora-rank, --nope-dim, --rope-dim and "
           "--v-head-dim apply only to --arch longcat_flash";
  }
  if (!(o.scale > 0.0)) return absl::StrCat("--scale must be positive, got ", o.scale);
  const std::pair<const char*, int64_t> required[] = {{"--layers", o.layers},
                                                      {"--hidden", o.hidden},
                                                      {"--heads", o.heads},
                                                      {"--intermediate", o.intermediate},
                                                      {"--vocab", o.vocab}};
  for (const auto& [flag, value] : required) {
    if (value < 1) return absl::StrCat(flag, " must be at least 1, got ", value);
  }
  if (o.kv_heads < 0) return absl::StrCat("--kv-heads must be at least 1, got ", o.kv_heads);
  const int64_t kv = o.kv_heads == 0 ? o.heads : o.kv_heads;
  if (o.heads % kv != 0) return absl::StrCat("--kv-heads ", kv, " does not divide --heads ", o.heads);
  if (o.head_dim < 0) return absl::StrCat("--head-dim must be at least 1, got ", o.head_dim);
  if (o.head_dim == 0 && !IsLongcat(o.arch) && o.hidden % o.heads != 0) {
    return absl::StrCat("--head-dim is needed: --heads ", o.heads, " does not divide --hidden ", o.hidden);
  }
  if (o.dtype != "f32" && o.dtype != "bf16") return absl::StrCat("--dtype must be f32 or bf16, got '", o.dtype, "'");
  if (o.out.empty()) return "--out is required";
  if (o.arch != "nemotron_h" && (!o.pattern.empty() || o.mamba_heads != 0 || o.mamba_head_dim != 0)) {
    return "--pattern, --mamba-heads and --mamba-head-dim apply only to --arch nemotron_h";
  }
  if (o.arch == "nemotron_h") return CheckNemotronH(o);
  if (IsLongcat(o.arch)) return CheckLongcat(o);
  if (o.arch == "qwen3") {
    if (o.experts != 0 || o.top_k != 0 || o.moe_intermediate != 0) {
      return "--experts, --top-k and --moe-intermediate apply only to --arch qwen3_moe";
    }
    return {};
  }
  if (o.experts < 1) return absl::StrCat("--experts must be at least 1 for qwen3_moe, got ", o.experts);
  if (o.top_k < 1 || o.top_k > o.experts) {
    return absl::StrCat("--top-k must be in [1, --experts=", o.experts, "], got ", o.top_k);
  }
  if (o.moe_intermediate < 1) {
    return absl::StrCat("--moe-intermediate must be at least 1 for qwen3_moe, got ", o.moe_intermediate);
  }
  return {};
}

weights::ModelConfig ToConfig(const ModelInitCommandOptions& o) {
  weights::ModelConfig c;
  c.architecture = o.arch;
  c.num_hidden_layers = o.layers;
  c.hidden_size = o.hidden;
  c.num_attention_heads = o.heads;
  c.num_key_value_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
  c.head_dim = o.head_dim == 0 ? o.hidden / o.heads : o.head_dim;
  c.intermediate_size = o.intermediate;
  c.vocab_size = o.vocab;
  c.dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  c.tie_word_embeddings = o.tie_embeddings;
  c.bos_token_id = 0;
  c.eos_token_id = o.vocab > 1 ? 1 : 0;
  if (o.arch == "nemotron_h") {
    c.hybrid_override_pattern = o.pattern;
    c.mamba_num_heads = o.mamba_heads;
    c.mamba_head_dim = o.mamba_head_dim;
    c.n_groups = o.groups;
    c.ssm_state_size = o.state;
    c.conv_kernel = o.conv_kernel;
    c.chunk_size = o.chunk;
    c.rms_norm_eps = 1e-5f;
    // The lower time-step limit at time_step_min: transformers' CUDA path
    // clamps dt to time_step_limit and its CPU path to time_step_min, and
    // this way both (and seam) compute the same.
    c.time_step_limit_min = c.time_step_min;
  }
  if (IsLongcat(o.arch)) {
    c.architecture = "longcat_flash";
    c.num_key_value_heads = o.heads;
    c.q_lora_rank = o.q_lora_rank;
    c.kv_lora_rank = o.kv_lora_rank;
    c.qk_nope_head_dim = o.nope_dim;
    c.qk_rope_head_dim = c.head_dim = o.rope_dim;
    c.v_head_dim = o.v_head_dim;
    c.num_experts = o.experts;
    c.zero_expert_num = o.zero_experts;
    c.num_experts_per_tok = o.top_k;
    c.moe_intermediate_size = o.moe_intermediate;
    c.routed_scaling_factor = static_cast<float>(o.routed_scaling);
    c.norm_topk_prob = false;
    c.rms_norm_eps = 1e-5f;
  }
  if (o.arch == "qwen3_moe") {
    c.num_experts = o.experts;
    c.num_experts_per_tok = o.top_k;
    c.moe_intermediate_size = o.moe_intermediate;
  }
  return c;
}

}  // namespace

absl::StatusOr<std::string> RunModelInitCommand(const ModelInitCommandOptions& options) {
  if (std::string bad = CheckArguments(options); !bad.empty()) return absl::InvalidArgumentError(bad);
  if (!options.force) {
    for (const char* name : {"config.json", "model.safetensors"}) {
      struct stat st;
      const std::string path = absl::StrCat(options.out, "/", name);
      if (stat(path.c_str(), &st) == 0) {
        return absl::AlreadyExistsError(
            absl::StrCat(path, " exists: refusing to overwrite a checkpoint (pass --force to replace it)"));
      }
    }
  }
  const weights::ModelConfig config = ToConfig(options);
  weights::RandomCheckpointOptions random;
  random.seed = options.seed;
  random.exact = options.exact;
  random.scale = static_cast<float>(options.scale);
  // INVALID_ARGUMENT here is a shape the flags asked for that does not fit (exit 2).
  if (absl::Status s = weights::WriteRandomCheckpoint(config, random, options.out); !s.ok()) {
    return Described("", s);
  }
  const auto layout = weights::HfTensorLayout(config);
  int64_t params = 0;
  for (const auto& spec : layout) params += NumElements(spec.shape);
  return absl::StrCat("wrote ", options.out, "/config.json and ", options.out, "/model.safetensors: ", options.arch,
                      ", ", config.num_hidden_layers, " layers, ", layout.size(), " tensors, ", params,
                      " parameters, ", DTypeName(config.dtype), options.exact ? ", exact dyadic weights" : "",
                      ", seed ", options.seed, "\n");
}

}  // namespace seam::cli

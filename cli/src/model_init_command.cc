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

// Empty when the options are usable; otherwise the message naming the bad flag.
std::string CheckArguments(const ModelInitCommandOptions& o) {
  if (o.arch != "qwen3" && o.arch != "qwen3_moe") {
    return absl::StrCat("--arch must be qwen3 or qwen3_moe, got '", o.arch, "'");
  }
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
  if (o.head_dim == 0 && o.hidden % o.heads != 0) {
    return absl::StrCat("--head-dim is needed: --heads ", o.heads, " does not divide --hidden ", o.hidden);
  }
  if (o.dtype != "f32" && o.dtype != "bf16") return absl::StrCat("--dtype must be f32 or bf16, got '", o.dtype, "'");
  if (o.out.empty()) return "--out is required";
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

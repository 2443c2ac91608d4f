#include "seam/testing/tiny_checkpoint.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "seam/core/status.h"
#include "seam/testing/temp_dir.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::testing {
namespace {

// Writes `config` into a fresh directory on first use for `slot`.
const std::string& CheckpointDir(const weights::ModelConfig& config, uint64_t seed, int slot) {
  static std::unique_ptr<TempDir> dirs[7];
  std::unique_ptr<TempDir>& dir = dirs[slot];
  if (dir == nullptr) {
    dir = std::make_unique<TempDir>("seam_models_test");
    weights::RandomCheckpointOptions options;
    options.seed = seed;
    options.scale = 10.0f;  // std 0.2: attention and routing far from uniform
    SEAM_CHECK_OK(weights::WriteRandomCheckpoint(config, options, dir->path()));
  }
  return dir->path();
}

}  // namespace

weights::ModelConfig TinyConfig(bool moe) {
  weights::ModelConfig c;
  c.architecture = moe ? "qwen3_moe" : "qwen3";
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 96;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = !moe;  // both lm_head paths
  c.dtype = DType::kF32;
  c.bos_token_id = 0;
  c.eos_token_id = 127;
  if (moe) {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 32;
    c.norm_topk_prob = true;
    c.decoder_sparse_step = 1;
  }
  return c;
}

const std::string& TinyCheckpointDir(bool moe) { return CheckpointDir(TinyConfig(moe), moe ? 11 : 7, moe ? 1 : 0); }

weights::ModelConfig FourLayerConfig(bool moe) {
  weights::ModelConfig c = TinyConfig(moe);
  c.num_hidden_layers = 4;
  if (moe) c.mlp_only_layers = {1};
  return c;
}

const std::string& FourLayerCheckpointDir(bool moe) {
  return CheckpointDir(FourLayerConfig(moe), moe ? 13 : 9, moe ? 3 : 2);
}

weights::ModelConfig TinyNemotronHConfig() {
  weights::ModelConfig c;
  c.architecture = "nemotron_h";
  c.hybrid_override_pattern = "MM*--M*-";
  c.num_hidden_layers = 8;
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 8;
  c.intermediate_size = 96;
  c.mamba_num_heads = 8;
  c.mamba_head_dim = 8;
  c.n_groups = 4;
  c.ssm_state_size = 16;
  c.conv_kernel = 4;
  c.chunk_size = 8;
  c.rms_norm_eps = 1e-5f;
  c.time_step_limit_min = c.time_step_min;
  c.max_position_embeddings = 512;
  c.dtype = DType::kF32;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

const std::string& TinyNemotronHCheckpointDir() { return CheckpointDir(TinyNemotronHConfig(), 17, 4); }

weights::ModelConfig ScanTiledNemotronHConfig() {
  weights::ModelConfig c = TinyNemotronHConfig();
  c.mamba_num_heads = 4;
  c.mamba_head_dim = 32;
  c.n_groups = 2;
  c.ssm_state_size = 64;
  return c;
}

const std::string& ScanTiledNemotronHCheckpointDir() { return CheckpointDir(ScanTiledNemotronHConfig(), 19, 5); }

weights::ModelConfig TinyLongcatFlashConfig() {
  weights::ModelConfig c;
  c.architecture = "longcat_flash";
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.q_lora_rank = 48;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 16;
  c.qk_rope_head_dim = 8;
  c.head_dim = 8;
  c.v_head_dim = 16;
  c.intermediate_size = 96;
  c.num_experts = 8;
  c.zero_expert_num = 2;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 32;
  c.routed_scaling_factor = 2.5f;
  c.norm_topk_prob = false;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 512;
  c.dtype = DType::kF32;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

const std::string& TinyLongcatFlashCheckpointDir() { return CheckpointDir(TinyLongcatFlashConfig(), 23, 6); }

weights::ModelConfig MicroConfig() {
  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.hidden_size = 8;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  c.intermediate_size = 12;
  c.vocab_size = 16;
  c.dtype = DType::kBF16;
  return c;
}

weights::ModelConfig ServingLoadConfig() {
  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = 8;
  c.hidden_size = 4096;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 12288;
  c.vocab_size = 32000;
  c.dtype = DType::kBF16;
  return c;
}

double MaxRelativeError(const Tensor& got, const Tensor& reference) {
  SEAM_CHECK(got.shape() == reference.shape());
  const std::vector<float> a = got.ToFloats(), b = reference.ToFloats();
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::fmax(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::fmax(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale == 0.0 ? diff : diff / scale;
}

std::vector<int32_t> PromptTokens(int seed, int length, int vocab) {
  std::vector<int32_t> t(length);
  uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1);
  for (int i = 0; i < length; ++i) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t[i] = 1 + static_cast<int32_t>((x * 0x2545f4914f6cdd1dULL >> 33) % (vocab - 1));
  }
  return t;
}

}  // namespace seam::testing

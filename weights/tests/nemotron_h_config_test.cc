// nemotron_h's config.json: a published-style file (bare Infinity, the
// hybrid pattern, constructor and attribute spellings), transformers 5's
// layer list, refusals by field name, the round trip through
// ModelConfigToJson, the parallel checks, and the tensor layout.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/model_config.h"
#include "seam/weights/random_checkpoint.h"
#include "seam/weights/tensor_layout.h"

namespace seam::weights {
namespace {

// The fields of a published Nemotron-H-8B config.json (auto_map and the
// tokenizer-side keys left out).
constexpr const char* kPublishedConfig = R"({
  "architectures": ["NemotronHForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attention_head_dim": 128, "bos_token_id": 1, "chunk_size": 128, "conv_kernel": 4, "eos_token_id": 2,
  "expand": 2, "hidden_dropout": 0.0, "hidden_size": 4096,
  "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
  "initializer_range": 0.02, "intermediate_size": 21504, "layer_norm_epsilon": 1e-05,
  "mamba_head_dim": 64, "mamba_hidden_act": "silu", "mamba_num_heads": 128, "mamba_proj_bias": false,
  "max_position_embeddings": 8192, "mlp_bias": false, "mlp_hidden_act": "relu2", "model_type": "nemotron_h",
  "n_groups": 8, "num_attention_heads": 32, "num_hidden_layers": 52, "num_key_value_heads": 8,
  "num_logits_to_keep": 1, "pad_token_id": 0, "rescale_prenorm_residual": true, "residual_in_fp32": false,
  "sliding_window": null, "ssm_state_size": 128, "tie_word_embeddings": false, "time_step_floor": 0.0001,
  "time_step_limit": [0.0, Infinity], "time_step_max": 0.1, "time_step_min": 0.001,
  "torch_dtype": "bfloat16", "transformers_version": "4.48.0.dev0", "use_bias": false, "use_cache": true,
  "use_conv_bias": true, "use_mamba_kernels": true, "vocab_size": 131072})";

// The tiny config as JSON, its infinite time-step limit written as a large number.
nlohmann::json TinyJson() {
  std::string text = ModelConfigToJson(seam::testing::TinyNemotronHConfig());
  const size_t at = text.find("Infinity");
  if (at != std::string::npos) text.replace(at, 8, "1e30");
  return nlohmann::json::parse(text);
}

TEST(NemotronHConfig, ParsesPublishedConfig) {
  auto c = ParseModelConfig(kPublishedConfig);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_nemotron_h());
  EXPECT_EQ(c->num_hidden_layers, 52);
  EXPECT_EQ(c->LayerKind(0), HybridLayer::kMamba);
  EXPECT_EQ(c->LayerKind(1), HybridLayer::kMlp);
  EXPECT_EQ(c->LayerKind(7), HybridLayer::kAttention);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->n_groups, 8);
  EXPECT_EQ(c->mamba_intermediate(), 8192);
  EXPECT_EQ(c->mamba_conv_dim(), 8192 + 2 * 8 * 128);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->time_step_limit_min, 0.0f);
  EXPECT_TRUE(std::isinf(c->time_step_limit_max));
  EXPECT_EQ(c->dtype, DType::kBF16);
}

TEST(NemotronHConfig, ReadsTransformers5LayerListAndConstructorNames) {
  auto j = TinyJson();
  j.erase("hybrid_override_pattern");
  j["layers_block_type"] = {"mamba", "linear_attention", "full_attention", "mlp"};
  j["num_hidden_layers"] = 4;
  j.erase("n_groups");
  j["mamba_n_groups"] = 2;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hybrid_override_pattern, "MM*-");
  EXPECT_EQ(c->n_groups, 2);
}

TEST(NemotronHConfig, RefusesByName) {
  const auto base = TinyJson();
  struct Case {
    const char* key;
    nlohmann::json value;
    absl::StatusCode code;
    const char* names;
  } cases[] = {
      {"rope_theta", 10000.0, absl::StatusCode::kUnimplemented, "field 'rope_theta' is not supported"},
      {"hybrid_override_pattern", "ME", absl::StatusCode::kUnimplemented, "MoE layers"},
      {"hybrid_override_pattern", "MX", absl::StatusCode::kInvalidArgument, "unknown layer type 'X'"},
      {"num_hidden_layers", 3, absl::StatusCode::kInvalidArgument, "differs from the pattern's 8 layers"},
      {"mlp_hidden_act", "silu", absl::StatusCode::kUnimplemented, "mlp_hidden_act 'silu'"},
      {"mamba_proj_bias", true, absl::StatusCode::kUnimplemented, "mamba_proj_bias=true"},
      {"n_groups", 3, absl::StatusCode::kInvalidArgument, "must divide mamba_num_heads"},
      {"time_step_limit", nlohmann::json::array({0.5, 0.1}), absl::StatusCode::kInvalidArgument, "0 <= min <= max"},
      {"attention_head_dim", 9, absl::StatusCode::kInvalidArgument, "disagrees with attention_head_dim"},
  };
  for (const Case& k : cases) {
    auto j = base;
    j[k.key] = k.value;
    auto c = ParseModelConfig(j.dump());
    EXPECT_EQ(c.status().code(), k.code) << k.key << ": " << c.status();
    EXPECT_NE(c.status().message().find(k.names), std::string::npos) << c.status();
  }
}

TEST(NemotronHConfig, RoundTripsWithInfinityAsPythonWritesIt) {
  ModelConfig c = seam::testing::TinyNemotronHConfig();
  c.time_step_limit_min = 0.0f;
  const std::string text = ModelConfigToJson(c);
  EXPECT_NE(text.find("Infinity"), std::string::npos) << text;
  auto back = ParseModelConfig(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hybrid_override_pattern, c.hybrid_override_pattern);
  EXPECT_EQ(back->mamba_conv_dim(), c.mamba_conv_dim());
  EXPECT_TRUE(std::isinf(back->time_step_limit_max));
  EXPECT_EQ(ModelConfigToJson(*back), text);
}

TEST(NemotronHConfig, ParallelChecksNameTheShardedField) {
  const ModelConfig c = seam::testing::TinyNemotronHConfig();
  EXPECT_TRUE(ValidateParallel(c, 4, 1).ok());
  EXPECT_TRUE(ValidateParallel(c, 4, 2).ok());
  ModelConfig odd = c;
  odd.n_groups = 2;
  auto s = ValidateParallel(odd, 4, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_groups (2) does not divide over attention TP 4"), std::string::npos) << s;
  EXPECT_TRUE(ValidateParallel(odd, 4, 2).ok());  // attention TP 2
}

TEST(NemotronHConfig, RandomCheckpointHoldsEveryTensorTransformersNames) {
  seam::testing::TempDir dir("seam_nemotron_h");
  const ModelConfig c = seam::testing::TinyNemotronHConfig();
  ASSERT_TRUE(WriteRandomCheckpoint(c, RandomCheckpointOptions{}, dir.path()).ok());
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status();
  for (const char* name : {"backbone.embeddings.weight", "backbone.layers.0.norm.weight",
                           "backbone.layers.0.mixer.in_proj.weight", "backbone.layers.1.mixer.conv1d.bias",
                           "backbone.layers.2.mixer.k_proj.weight", "backbone.layers.3.mixer.up_proj.weight",
                           "backbone.norm_f.weight", "lm_head.weight"}) {
    EXPECT_TRUE((*ck)->Has(name)) << name;
  }
  EXPECT_FALSE((*ck)->Has("backbone.layers.2.mixer.q_norm.weight"));
  auto conv = (*ck)->Load("backbone.layers.0.mixer.conv1d.weight", {c.mamba_conv_dim(), 1, 4}, DType::kF32);
  EXPECT_TRUE(conv.ok()) << conv.status();
  // A = -exp(A_log) with A in [1, 16]; dt_bias puts softplus(dt_bias) in [time_step_min, time_step_max].
  auto a_log = (*ck)->Load("backbone.layers.0.mixer.A_log", {8}, DType::kF32);
  auto dt_bias = (*ck)->Load("backbone.layers.0.mixer.dt_bias", {8}, DType::kF32);
  ASSERT_TRUE(a_log.ok() && dt_bias.ok());
  for (float v : a_log->ToFloats()) EXPECT_TRUE(v >= 0.0f && v <= std::log(16.0f) + 1e-6f) << v;
  for (float v : dt_bias->ToFloats()) {
    const float dt = std::log1p(std::exp(v));
    EXPECT_TRUE(dt >= c.time_step_min * 0.999f && dt <= c.time_step_max * 1.001f) << dt;
  }
}

}  // namespace
}  // namespace seam::weights

// config.json parsing (real Qwen3 / Qwen3-MoE configs), the sparse-layer rule,
// ModelConfigToJson round trips and the TP divisibility checks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/weights/model_config.h"

namespace seam::weights {
namespace {

// Qwen3-0.6B's config.json as published.
constexpr const char* kQwen3Config = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen3-30B-A3B's config.json as published, with a list eos id and mlp_only_layers.
constexpr const char* kQwen3MoeConfig = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": [151645, 151643], "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [0, 5],
  "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
  "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
  "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// What transformers 5.17's save_pretrained writes for a small Qwen3-MoE:
// "dtype", "rope_parameters" and "num_local_experts" replace 4.x's keys.
constexpr const char* kQwen3MoeConfigV5 = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "decoder_sparse_step": 1, "dtype": "bfloat16", "eos_token_id": 1, "head_dim": 16,
  "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
  "layer_types": ["full_attention", "full_attention"], "max_position_embeddings": 32768,
  "max_window_layers": 2, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 32,
  "norm_topk_prob": true, "num_attention_heads": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2,
  "num_key_value_heads": 2, "num_local_experts": 4, "output_router_logits": false, "pad_token_id": null,
  "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
  "transformers_version": "5.17.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 128})";

TEST(ModelConfig, ParsesTransformers5Spelling) {
  auto c = ParseModelConfig(kQwen3MoeConfigV5);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->num_experts, 4);
  EXPECT_EQ(c->num_experts_per_tok, 2);
  auto j = nlohmann::json::parse(kQwen3MoeConfigV5);
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}};
  auto yarn = ParseModelConfig(j.dump());
  EXPECT_EQ(yarn.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(yarn.status().message().find("yarn"), std::string::npos) << yarn.status();
  j = nlohmann::json::parse(kQwen3MoeConfigV5);
  j["layer_types"][1] = "sliding_attention";
  EXPECT_EQ(ParseModelConfig(j.dump()).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ModelConfig, ParsesQwen3) {
  auto c = ParseModelConfig(kQwen3Config);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_FALSE(c->is_moe());
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->num_hidden_layers, 28);
  EXPECT_EQ(c->num_attention_heads, 16);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 128);  // not hidden/heads = 64
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->max_position_embeddings, 40960);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_id, 151645);
  for (int l = 0; l < 28; ++l) EXPECT_FALSE(c->IsSparseLayer(l));
}

TEST(ModelConfig, ParsesQwen3MoeWithListEosAndMlpOnlyLayers) {
  auto c = ParseModelConfig(kQwen3MoeConfig);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen3_moe");
  EXPECT_TRUE(c->is_moe());
  EXPECT_EQ(c->eos_token_id, 151645);
  EXPECT_EQ(c->num_experts, 128);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 768);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->mlp_only_layers, (std::vector<int64_t>{0, 5}));
  EXPECT_FALSE(c->IsSparseLayer(0));
  EXPECT_TRUE(c->IsSparseLayer(1));
  EXPECT_FALSE(c->IsSparseLayer(5));
  EXPECT_TRUE(c->IsSparseLayer(47));
}

TEST(ModelConfig, SparseStepFollowsTransformersRule) {
  auto j = nlohmann::json::parse(kQwen3MoeConfig);
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = nlohmann::json::array();
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->IsSparseLayer(0));  // (0+1) % 2 != 0
  EXPECT_TRUE(c->IsSparseLayer(1));
  EXPECT_FALSE(c->IsSparseLayer(2));
  EXPECT_TRUE(c->IsSparseLayer(3));
}

TEST(ModelConfig, HeadDimDefaultsToHiddenOverHeads) {
  auto j = nlohmann::json::parse(kQwen3Config);
  j.erase("head_dim");
  j.erase("torch_dtype");
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->dtype, DType::kF32);
}

TEST(ModelConfig, UnsupportedArchitectureIsUnimplementedNamingIt) {
  auto j = nlohmann::json::parse(kQwen3Config);
  j["architectures"] = {"LlamaForCausalLM"};
  auto c = ParseModelConfig(j.dump());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("LlamaForCausalLM"), std::string::npos) << c.status();
}

TEST(ModelConfig, MissingOrWrongTypedFieldIsInvalidArgumentNamingIt) {
  auto j = nlohmann::json::parse(kQwen3Config);
  j.erase("hidden_size");
  auto c = ParseModelConfig(j.dump());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'hidden_size' is missing"), std::string::npos) << c.status();
  j = nlohmann::json::parse(kQwen3Config);
  j["vocab_size"] = "big";
  c = ParseModelConfig(j.dump());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'vocab_size' must be an integer"), std::string::npos) << c.status();
  EXPECT_EQ(ParseModelConfig("not json").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelConfig, UnsupportedFeaturesAreRefused) {
  auto j = nlohmann::json::parse(kQwen3Config);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(ParseModelConfig(j.dump()).status().code(), absl::StatusCode::kUnimplemented);
  j = nlohmann::json::parse(kQwen3Config);
  j["torch_dtype"] = "float64";
  auto c = ParseModelConfig(j.dump());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("float64"), std::string::npos) << c.status();
}

TEST(ModelConfig, ToJsonRoundTripsAndWritesTransformersKeys) {
  for (const char* text : {kQwen3Config, kQwen3MoeConfig}) {
    auto c = ParseModelConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string written = ModelConfigToJson(*c);
    auto back = ParseModelConfig(written);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(ModelConfigToJson(*back), written);
    EXPECT_EQ(back->mlp_only_layers, c->mlp_only_layers);
    EXPECT_EQ(back->eos_token_id, c->eos_token_id);
    // Same key set as the published config (which transformers wrote).
    auto published = nlohmann::json::parse(text), ours = nlohmann::json::parse(written);
    for (auto& [key, value] : published.items()) EXPECT_TRUE(ours.contains(key)) << key;
    for (auto& [key, value] : ours.items()) EXPECT_TRUE(published.contains(key)) << key;
    EXPECT_EQ(ours["rms_norm_eps"].dump(), "1e-06");
    EXPECT_TRUE(ours["rope_scaling"].is_null());
  }
}

TEST(ValidateParallel, AcceptsDivisibleTopologies) {
  auto c = ParseModelConfig(kQwen3Config);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(ValidateParallel(*c, 8, 1).ok());
  EXPECT_TRUE(ValidateParallel(*c, 8, 2).ok());
  auto m = ParseModelConfig(kQwen3MoeConfig);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(ValidateParallel(*m, 4, 1).ok());
}

TEST(ValidateParallel, NamesFieldAndSizes) {
  auto c = ParseModelConfig(kQwen3Config);
  ASSERT_TRUE(c.ok());
  c->num_attention_heads = 6;
  c->num_key_value_heads = 6;
  absl::Status s = ValidateParallel(*c, 4, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_attention_heads (6) does not divide over attention TP 4"), std::string::npos) << s;

  c = ParseModelConfig(kQwen3Config);
  s = ValidateParallel(*c, 16, 1);  // 16 heads fine, 8 KV heads not
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_key_value_heads (8) does not divide over attention TP 16"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("KV heads must divide over attention TP"), std::string::npos) << s;

  c->intermediate_size = 3000;
  s = ValidateParallel(*c, 16, 2);  // attention TP 8 fine
  EXPECT_NE(s.message().find("intermediate_size (3000) does not divide over TP 16"), std::string::npos) << s;

  auto m = ParseModelConfig(kQwen3MoeConfig);
  m->moe_intermediate_size = 102;
  s = ValidateParallel(*m, 4, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("moe_intermediate_size (102) does not divide over TP 4"), std::string::npos) << s;

  EXPECT_EQ(ValidateParallel(*m, 4, 3).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::weights

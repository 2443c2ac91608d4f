// longcat_flash's config.json: what transformers 5 writes reads back, the
// logical layers are half of its num_hidden_layers, and every field or value
// seam does not implement is refused by name.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/weights/model_config.h"
#include "seam/weights/tensor_layout.h"

namespace seam::weights {
namespace {

using ::testing::HasSubstr;

ModelConfig Tiny() {
  ModelConfig c;
  c.architecture = "longcat_flash";
  c.vocab_size = 128, c.hidden_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.num_key_value_heads = 4, c.q_lora_rank = 48, c.kv_lora_rank = 32, c.qk_nope_head_dim = 16;
  c.qk_rope_head_dim = 8, c.head_dim = 8, c.v_head_dim = 16, c.intermediate_size = 96;
  c.num_experts = 8, c.zero_expert_num = 2, c.num_experts_per_tok = 2, c.moe_intermediate_size = 32;
  c.routed_scaling_factor = 2.5f, c.rms_norm_eps = 1e-5f, c.rope_theta = 10000.0f;
  return c;
}

// The tiny config's JSON with `key` set to `value` (null: removed).
std::string With(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(ModelConfigToJson(Tiny()));
  if (value.is_null()) {
    j.erase(key);
  } else {
    j[key] = value;
  }
  return j.dump();
}

TEST(LongcatFlashConfig, WhatTransformersWritesReadsBack) {
  const std::string text = ModelConfigToJson(Tiny());
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["model_type"], "longcat_flash");
  EXPECT_EQ(j["num_hidden_layers"], 4);  // one per attention
  EXPECT_EQ(j["num_layers"], 2);
  auto c = ParseModelConfig(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_longcat_flash());
  EXPECT_EQ(c->num_hidden_layers, 2);
  EXPECT_EQ(c->kv_lora_rank, 32);
  EXPECT_EQ(c->zero_expert_num, 2);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->norm_topk_prob);
}

TEST(LongcatFlashConfig, TheAliasesOfTransformersAttributeMapRead) {
  nlohmann::json j = nlohmann::json::parse(ModelConfigToJson(Tiny()));
  j.erase("moe_topk");
  j["num_experts_per_tok"] = 3;
  j.erase("rope_parameters");
  j["rope_theta"] = 500.0;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_experts_per_tok, 3);
  EXPECT_FLOAT_EQ(c->rope_theta, 500.0f);
  j["moe_topk"] = 2;
  EXPECT_THAT(std::string(ParseModelConfig(j.dump()).status().message()),
              HasSubstr("field 'moe_topk' (2) disagrees with num_experts_per_tok (3)"));
}

TEST(LongcatFlashConfig, WhatIsNotImplementedIsRefusedByName) {
  const std::pair<std::string, std::string> cases[] = {
      {With("router_bias", true), "router_bias=true is not supported for longcat_flash"},
      {With("attention_bias", true), "attention_bias=true is not supported for longcat_flash"},
      {With("zero_expert_type", "mlp"), "zero_expert_type \"mlp\" (identity only)"},
      {With("q_lora_rank", nlohmann::json::value_t::null), ""},  // removed: the default, accepted
      {With("num_key_value_heads", 2), "num_key_value_heads 2 other than num_attention_heads 4"},
      {With("head_dim", 16), "head_dim 16 other than qk_rope_head_dim 8"},
      {With("quantization_config", nlohmann::json::object()), "field 'quantization_config' is not supported"},
      {With("rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}), "rope_parameters"},
      {With("mla_scale_q_lora", false), "mla_scale_q_lora=false"},
      {With("hidden_act", "gelu"), "hidden_act \"gelu\""},
  };
  for (const auto& [text, message] : cases) {
    auto c = ParseModelConfig(text);
    if (message.empty()) {
      EXPECT_TRUE(c.ok()) << c.status();
      continue;
    }
    ASSERT_FALSE(c.ok()) << message;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << c.status();
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(message));
  }
  nlohmann::json j = nlohmann::json::parse(ModelConfigToJson(Tiny()));
  j["q_lora_rank"] = nullptr;  // a full-rank q_proj
  EXPECT_THAT(std::string(ParseModelConfig(j.dump()).status().message()), HasSubstr("q_lora_rank=null"));
  j = nlohmann::json::parse(ModelConfigToJson(Tiny()));
  j["num_hidden_layers"] = 3;
  const absl::Status layers = ParseModelConfig(j.dump()).status();
  EXPECT_EQ(layers.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layers.message()), HasSubstr("must be twice num_layers (2)"));
}

TEST(LongcatFlashConfig, TheLayoutHasBothSublayersAndTheRoutedExpertsOnly) {
  const std::vector<TensorSpec> layout = HfTensorLayout(Tiny());
  auto has = [&](const std::string& name) {
    for (const TensorSpec& s : layout) {
      if (s.name == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("model.layers.1.self_attn.1.kv_a_proj_with_mqa.weight"));
  EXPECT_TRUE(has("model.layers.0.mlps.1.down_proj.weight"));
  EXPECT_TRUE(has("model.layers.0.mlp.router.e_score_correction_bias"));
  EXPECT_TRUE(has("model.layers.0.mlp.experts.7.up_proj.weight"));
  EXPECT_FALSE(has("model.layers.0.mlp.experts.8.up_proj.weight"));  // zero experts have no weights
}

TEST(LongcatFlashConfig, AttentionHeadsAndIntermediatesMustDivide) {
  EXPECT_TRUE(ValidateParallel(Tiny(), 4, 1).ok());
  EXPECT_THAT(std::string(ValidateParallel(Tiny(), 8, 1).message()),
              HasSubstr("num_attention_heads (4) does not divide over attention TP 8"));
  ModelConfig c = Tiny();
  c.moe_intermediate_size = 30;
  EXPECT_THAT(std::string(ValidateParallel(c, 4, 2).message()),
              HasSubstr("expert_ffn_hidden_size (30) does not divide over TP 4"));
}

}  // namespace
}  // namespace seam::weights

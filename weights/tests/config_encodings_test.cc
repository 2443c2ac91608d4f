// config.json as its writers spell it: every non-finite float encoding
// (transformers 5's {"__float__": ...}, Python's bare Infinity / -Infinity /
// NaN) for every architecture's reader, a field that changes the math and
// is not implemented refused by name, and which head a tied config computes
// with (weights::ResolveOutputHead).
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/model_config.h"
#include "seam/weights/output_head.h"
#include "seam/weights/safetensors.h"

namespace seam::weights {
namespace {

using seam::testing::TempDir;
using seam::testing::WriteText;

// tests/fixtures/golden/nemotron_h_hf_tied/config.json's fields as
// transformers 5.17 wrote them (save_pretrained, defaults kept).
std::string Transformers5NemotronH(const std::string& limit) {
  return R"({"architectures": ["NemotronHForCausalLM"], "attention_bias": false, "bos_token_id": 1,
    "chunk_size": 8, "conv_kernel": 4, "dtype": "float32", "eos_token_id": 2, "expand": 2, "head_dim": 4,
    "hidden_size": 32, "intermediate_size": 64, "layer_norm_epsilon": 1e-05,
    "layers_block_type": ["linear_attention", "full_attention", "linear_attention", "mlp"],
    "mamba_head_dim": 4, "mamba_num_heads": 8, "mamba_ssm_cache_dtype": "float32", "model_type": "nemotron_h",
    "moe_intermediate_size": 7688, "moe_latent_size": null, "mtp_layers_block_type": ["full_attention", "moe"],
    "n_group": 1, "n_groups": 4, "n_routed_experts": 8, "num_attention_heads": 8, "num_key_value_heads": 4,
    "num_logits_to_keep": 1, "num_nextn_predict_layers": 0, "routed_scaling_factor": 1.0, "ssm_state_size": 8,
    "tie_word_embeddings": true, "time_step_limit": )" +
         limit + R"(, "time_step_min": 0.001, "topk_group": 1, "transformers_version": "5.17.0",
    "use_mamba_kernels": false, "vocab_size": 256})";
}

TEST(ConfigFloats, TransformersFiveFloatObjectIsInfinity) {
  auto c = ParseModelConfig(Transformers5NemotronH(R"([0.001, {"__float__": "Infinity"}])"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->time_step_limit_min, 0.001f);
  EXPECT_TRUE(std::isinf(c->time_step_limit_max) && c->time_step_limit_max > 0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->hybrid_override_pattern, "M*M-");
}

TEST(ConfigFloats, BareInfinityAndTheFloatObjectReadAlike) {
  for (const char* limit : {R"([0.001, Infinity])", R"([0.001, {"__float__": "Infinity"}])",
                            R"([0.001, {"__float__": "inf"}])", R"([{"__float__": 0.001}, Infinity])"}) {
    auto c = ParseModelConfig(Transformers5NemotronH(limit));
    ASSERT_TRUE(c.ok()) << limit << ": " << c.status();
    EXPECT_FLOAT_EQ(c->time_step_limit_min, 0.001f) << limit;
    EXPECT_TRUE(std::isinf(c->time_step_limit_max)) << limit;
  }
}

TEST(ConfigFloats, NegativeInfinityAndNaNAreRefusedWhereTheyMakeNoSense) {
  for (const char* limit : {R"([-Infinity, Infinity])", R"([NaN, Infinity])", R"([{"__float__": "NaN"}, 1.0])",
                            R"([{"__float__": "-Infinity"}, 1.0])"}) {
    auto c = ParseModelConfig(Transformers5NemotronH(limit));
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << limit;
    EXPECT_NE(c.status().message().find("field 'time_step_limit' must satisfy 0 <= min <= max"), std::string::npos)
        << c.status();
  }
  auto text = ParseModelConfig(Transformers5NemotronH(R"([0.001, {"__float__": "lots"}])"));
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(),
            R"(config.json: field 'time_step_limit' must hold numbers, got {"__float__":"lots"})");
}

nlohmann::json Qwen3Json() { return nlohmann::json::parse(ModelConfigToJson(seam::testing::MicroConfig())); }

TEST(ConfigFloats, Qwen3ReadsEveryEncodingAndRefusesANonFiniteEpsilon) {
  // A non-finite value in a field that does not touch inference is no reason to refuse.
  std::string text = Qwen3Json().dump();
  text.insert(text.size() - 1, R"(, "router_aux_loss_coef": {"__float__": "Infinity"}, "temperature": NaN)");
  auto ok = ParseModelConfig(text);
  ASSERT_TRUE(ok.ok()) << ok.status();
  for (const char* eps : {R"({"__float__": "Infinity"})", "Infinity", "-Infinity", "NaN"}) {
    std::string bad = Qwen3Json().dump();
    const size_t at = bad.find("\"rms_norm_eps\":");
    const size_t end = bad.find(',', at);
    bad.replace(at, end - at, std::string("\"rms_norm_eps\":") + eps);
    auto c = ParseModelConfig(bad);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << eps;
    EXPECT_NE(c.status().message().find("field 'rms_norm_eps' must be a number within float range"),
              std::string::npos)
        << c.status();
  }
}

TEST(ConfigFields, Qwen3FieldThatChangesTheMathIsRefusedByName) {
  auto j = Qwen3Json();
  j["quantization_config"] = {{"quant_method", "fp8"}};
  auto quantized = ParseModelConfig(j.dump());
  EXPECT_EQ(quantized.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(quantized.status().message(), "config.json: field 'quantization_config' is not supported for qwen3");

  j = Qwen3Json();
  j["hidden_act"] = "gelu";
  auto gelu = ParseModelConfig(j.dump());
  EXPECT_EQ(gelu.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(gelu.status().message(), R"(config.json: hidden_act "gelu" is not supported (silu))");

  j = Qwen3Json();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.5}};
  auto partial = ParseModelConfig(j.dump());
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(partial.status().message(),
            "config.json: field 'rope_parameters.partial_rotary_factor' is not supported (0.5)");
}

TEST(ConfigFields, TrainingAndGenerationFieldsAreAccepted) {
  auto j = Qwen3Json();
  j["_name_or_path"] = "Qwen/Qwen3-0.6B";
  j["pad_token_id"] = nullptr;
  j["output_hidden_states"] = false;
  j["router_aux_loss_coef"] = 0.001;
  j["layer_types"] = {"full_attention"};
  auto c = ParseModelConfig(j.dump());
  EXPECT_TRUE(c.ok()) << c.status();
}

// A checkpoint of MicroConfig with `tied` and, when `own_head`, an lm_head.weight.
std::unique_ptr<Checkpoint> HeadCheckpoint(const TempDir& dir, bool tied, bool own_head) {
  ModelConfig c = seam::testing::MicroConfig();
  c.tie_word_embeddings = tied;
  WriteText(dir.File("config.json"), ModelConfigToJson(c));
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"model.embed_tokens.weight", Tensor::Zeros({c.vocab_size, c.hidden_size}, DType::kF32)}};
  if (own_head) tensors.push_back({"lm_head.weight", Tensor::Zeros({c.vocab_size, c.hidden_size}, DType::kF32)});
  EXPECT_TRUE(WriteSafetensors(dir.File("model.safetensors"), tensors).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  return std::move(*ckpt);
}

TEST(OutputHead, TiedConfigWithoutAHeadReadsTheEmbedding) {
  TempDir dir;
  auto ckpt = HeadCheckpoint(dir, true, false);
  auto head = ResolveOutputHead(*ckpt, "model.embed_tokens.weight");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->tensor, "model.embed_tokens.weight");
  EXPECT_TRUE(head->is_embedding);
  EXPECT_EQ(head->disagreement, "");
}

TEST(OutputHead, TiedConfigWithItsOwnHeadReadsTheStoredHeadAndSaysSo) {
  TempDir dir;
  auto ckpt = HeadCheckpoint(dir, true, true);
  auto head = ResolveOutputHead(*ckpt, "backbone.embeddings.weight");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->tensor, "lm_head.weight");
  EXPECT_FALSE(head->is_embedding);
  EXPECT_EQ(head->disagreement,
            dir.path() + ": config.json sets tie_word_embeddings but the checkpoint holds its own lm_head.weight; "
                         "computing with the stored lm_head.weight, as transformers does, not with "
                         "backbone.embeddings.weight");
}

TEST(OutputHead, UntiedConfigWithoutAHeadIsNotFound) {
  TempDir dir;
  auto ckpt = HeadCheckpoint(dir, false, false);
  auto head = ResolveOutputHead(*ckpt, "model.embed_tokens.weight");
  EXPECT_EQ(head.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(head.status().message(), dir.path() + ": config.json sets tie_word_embeddings false but the checkpoint "
                                                  "has no lm_head.weight");
  auto untied = HeadCheckpoint(dir, false, true);
  auto stored = ResolveOutputHead(*untied, "model.embed_tokens.weight");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->tensor, "lm_head.weight");
  EXPECT_EQ(stored->disagreement, "");
}

}  // namespace
}  // namespace seam::weights

// WriteRandomCheckpoint: reopens with every tensor transformers expects (both
// architectures, tied and untied), is deterministic, and exact mode is dyadic.
#include <cmath>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "seam/testing/temp_dir.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/random_checkpoint.h"
#include "seam/weights/tensor_layout.h"

namespace seam::weights {
namespace {

using seam::testing::TempDir;

ModelConfig Config(const std::string& arch, bool tied, DType dtype) {
  ModelConfig c;
  c.architecture = arch;
  c.hidden_size = 32;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;  // A·D = 64 != H: catches swapped q/o shapes
  c.intermediate_size = 48;
  c.vocab_size = 40;
  c.tie_word_embeddings = tied;
  c.dtype = dtype;
  if (arch == "qwen3_moe") {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 8;
    c.mlp_only_layers = {1};
  }
  return c;
}

// The names transformers' Qwen3 modules register, spelled out independently of HfTensorLayout.
std::set<std::string> ExpectedNames(const ModelConfig& c) {
  std::set<std::string> names = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!c.tie_word_embeddings) names.insert("lm_head.weight");
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* s : {"input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                          "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm"}) {
      names.insert(p + s + ".weight");
    }
    const bool sparse = c.is_moe() && l != 1;
    if (!sparse) {
      for (const char* s : {"gate_proj", "up_proj", "down_proj"}) names.insert(p + "mlp." + s + ".weight");
      continue;
    }
    names.insert(p + "mlp.gate.weight");
    for (int e = 0; e < c.num_experts; ++e) {
      for (const char* s : {"gate_proj", "up_proj", "down_proj"}) {
        names.insert(p + "mlp.experts." + std::to_string(e) + "." + s + ".weight");
      }
    }
  }
  return names;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RandomCheckpoint, ReopensWithEveryTensorForBothArchitectures) {
  for (const std::string arch : {"qwen3", "qwen3_moe"}) {
    for (bool tied : {false, true}) {
      SCOPED_TRACE(arch + (tied ? " tied" : " untied"));
      const ModelConfig c = Config(arch, tied, DType::kBF16);
      TempDir dir;
      ASSERT_TRUE(WriteRandomCheckpoint(c, {}, dir.path()).ok());
      auto ckpt = Checkpoint::Open(dir.path());
      ASSERT_TRUE(ckpt.ok()) << ckpt.status();
      EXPECT_EQ((*ckpt)->config().architecture, arch);
      EXPECT_EQ((*ckpt)->config().tie_word_embeddings, tied);
      auto file = SafetensorsFile::Open(dir.File("model.safetensors"));
      ASSERT_TRUE(file.ok());
      std::set<std::string> stored;
      for (const TensorInfo& t : (*file)->tensors()) stored.insert(t.name);
      EXPECT_EQ(stored, ExpectedNames(c));

      const int64_t H = 32, D = 16, Q = 64, KV = 32;
      const std::map<std::string, Shape> shapes = {
          {"model.embed_tokens.weight", {40, H}},
          {"model.layers.0.self_attn.q_proj.weight", {Q, H}},
          {"model.layers.0.self_attn.k_proj.weight", {KV, H}},
          {"model.layers.0.self_attn.v_proj.weight", {KV, H}},
          {"model.layers.0.self_attn.o_proj.weight", {H, Q}},
          {"model.layers.0.self_attn.q_norm.weight", {D}},
          {"model.layers.0.input_layernorm.weight", {H}},
          {"model.layers.1.mlp.gate_proj.weight", {48, H}},
          {"model.layers.1.mlp.down_proj.weight", {H, 48}},
          {"model.norm.weight", {H}}};
      for (const auto& [name, shape] : shapes) {
        auto t = (*ckpt)->Load(name, shape, DType::kBF16);
        EXPECT_TRUE(t.ok()) << t.status();
      }
      if (c.is_moe()) {
        EXPECT_TRUE((*ckpt)->Load("model.layers.0.mlp.gate.weight", {4, H}, DType::kF32).ok());
        EXPECT_TRUE((*ckpt)->Load("model.layers.2.mlp.experts.3.up_proj.weight", {8, H}, DType::kF32).ok());
        EXPECT_TRUE((*ckpt)->Load("model.layers.2.mlp.experts.3.down_proj.weight", {H, 8}, DType::kF32).ok());
      }
      for (const TensorSpec& spec : HfTensorLayout(c)) {
        auto t = (*ckpt)->Load(spec.name, spec.shape, DType::kBF16);
        EXPECT_TRUE(t.ok()) << t.status();
      }
    }
  }
}

TEST(RandomCheckpoint, SameSeedSameBytesOtherSeedOtherBytes) {
  const ModelConfig c = Config("qwen3", false, DType::kF32);
  TempDir a, b, d;
  RandomCheckpointOptions o;
  o.seed = 11;
  ASSERT_TRUE(WriteRandomCheckpoint(c, o, a.path()).ok());
  ASSERT_TRUE(WriteRandomCheckpoint(c, o, b.path()).ok());
  o.seed = 12;
  ASSERT_TRUE(WriteRandomCheckpoint(c, o, d.path()).ok());
  EXPECT_EQ(ReadAll(a.File("model.safetensors")), ReadAll(b.File("model.safetensors")));
  EXPECT_NE(ReadAll(a.File("model.safetensors")), ReadAll(d.File("model.safetensors")));
  EXPECT_EQ(ReadAll(a.File("config.json")), ReadAll(d.File("config.json")));
}

TEST(RandomCheckpoint, DefaultValuesLookLikeAnInitialisedModel) {
  const ModelConfig c = Config("qwen3", false, DType::kF32);
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(c, {}, dir.path()).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  auto q = (*ckpt)->Load("model.layers.0.self_attn.q_proj.weight", {64, 32}, DType::kF32);
  double sum2 = 0;
  for (float v : q->ToFloats()) sum2 += v * v;
  EXPECT_NEAR(std::sqrt(sum2 / q->numel()), 0.02, 0.003);
  auto norm = (*ckpt)->Load("model.norm.weight", {32}, DType::kF32);
  for (float v : norm->ToFloats()) EXPECT_NEAR(v, 1.0f, 0.15f);
}

TEST(RandomCheckpoint, ExactValuesAreDyadic) {
  const ModelConfig c = Config("qwen3_moe", true, DType::kBF16);
  TempDir dir;
  RandomCheckpointOptions o;
  o.exact = true;
  ASSERT_TRUE(WriteRandomCheckpoint(c, o, dir.path()).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  for (const TensorSpec& spec : HfTensorLayout(c)) {
    auto t = (*ckpt)->Load(spec.name, spec.shape, DType::kF32);
    ASSERT_TRUE(t.ok());
    for (float v : t->ToFloats()) {
      if (spec.is_norm) {
        ASSERT_EQ(v * 8, std::floor(v * 8)) << spec.name;
        ASSERT_TRUE(v >= 0.5f && v <= 1.5f) << spec.name << " " << v;
      } else {
        ASSERT_EQ(v * 64, std::floor(v * 64)) << spec.name;
        ASSERT_TRUE(v >= -0.25f && v <= 0.25f) << spec.name << " " << v;
      }
    }
  }
}

TEST(RandomCheckpoint, BadConfigIsInvalidArgument) {
  ModelConfig c = Config("qwen3", false, DType::kF32);
  c.num_key_value_heads = 3;  // does not divide 4 heads
  TempDir dir;
  absl::Status s = WriteRandomCheckpoint(c, {}, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_key_value_heads"), std::string::npos) << s;
}

}  // namespace
}  // namespace seam::weights

// Every way a checkpoint directory can be bad, each with its status code and
// a message naming what is wrong.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/testing/temp_dir.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::weights {
namespace {

using seam::testing::TempDir;
using seam::testing::WriteText;

ModelConfig SmallConfig() {
  ModelConfig c;
  c.architecture = "qwen3";
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.intermediate_size = 24;
  c.vocab_size = 32;
  return c;
}

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

TEST(CheckpointErrors, MissingConfigIsNotFoundNamingPath) {
  TempDir dir;
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(ckpt.status(), dir.File("config.json"))) << ckpt.status();
}

TEST(CheckpointErrors, MissingWeightsFileIsNotFoundNamingPath) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(SmallConfig()));
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(ckpt.status(), dir.File("model.safetensors"))) << ckpt.status();

  WriteText(dir.File("model.safetensors.index.json"), R"({"weight_map": {"x": "shard-1.safetensors"}})");
  ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(ckpt.status(), dir.File("shard-1.safetensors"))) << ckpt.status();
}

TEST(CheckpointErrors, MissingTensorIsNotFoundNamingIt) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), {}, dir.path()).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto t = (*ckpt)->Load("model.layers.2.self_attn.q_proj.weight", {16, 16}, DType::kF32);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(t.status(), "'model.layers.2.self_attn.q_proj.weight'")) << t.status();
  EXPECT_TRUE(Contains(t.status(), dir.path())) << t.status();
}

TEST(CheckpointErrors, ShapeThatDoesNotMatchConfigIsInvalidArgumentNamingBoth) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), {}, dir.path()).ok());
  // config.json now claims a bigger FFN than the weights hold.
  ModelConfig lying = SmallConfig();
  lying.intermediate_size = 32;
  WriteText(dir.File("config.json"), ModelConfigToJson(lying));
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = (*ckpt)->config();
  auto t = (*ckpt)->Load("model.layers.0.mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, DType::kF32);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(t.status(), "'model.layers.0.mlp.gate_proj.weight'")) << t.status();
  EXPECT_TRUE(Contains(t.status(), "expected shape [32, 16]")) << t.status();
  EXPECT_TRUE(Contains(t.status(), "got [24, 16]")) << t.status();
}

TEST(CheckpointErrors, UnsupportedDtypeIsUnimplemented) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(SmallConfig()));
  const std::string header =
      R"({"model.norm.weight":{"dtype":"F64","shape":[16],"data_offsets":[0,128]}})";
  const uint64_t n = header.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  bytes += header + std::string(128, '\0');
  WriteText(dir.File("model.safetensors"), bytes);
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(ckpt.status(), "F64")) << ckpt.status();
  EXPECT_TRUE(Contains(ckpt.status(), "model.norm.weight")) << ckpt.status();
}

TEST(CheckpointErrors, UnsupportedArchitectureIsUnimplementedNamingIt) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), {}, dir.path()).ok());
  auto config = nlohmann::json::parse(ModelConfigToJson(SmallConfig()));
  config["architectures"] = nlohmann::json::array({"LlamaForCausalLM"});
  config["model_type"] = "llama";
  WriteText(dir.File("config.json"), config.dump());
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(ckpt.status(), "LlamaForCausalLM")) << ckpt.status();
}

TEST(CheckpointErrors, TruncatedFileIsDataLoss) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), {}, dir.path()).ok());
  const std::string path = dir.File("model.safetensors");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(ckpt.status(), path)) << ckpt.status();
  EXPECT_TRUE(Contains(ckpt.status(), "truncated")) << ckpt.status();
}

TEST(CheckpointErrors, ConfigThatDoesNotDivideOverTpNamesFieldAndSizes) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(SmallConfig(), {}, dir.path()).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  absl::Status s = ValidateParallel((*ckpt)->config(), 8, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "num_attention_heads (4) does not divide over attention TP 8")) << s;
  s = ValidateParallel((*ckpt)->config(), 4, 1);
  EXPECT_TRUE(Contains(s, "num_key_value_heads (2) does not divide over attention TP 4")) << s;
  s = ValidateParallel((*ckpt)->config(), 4, 2);  // attention TP 2 fine; FFN 24 over 4 fine
  EXPECT_TRUE(s.ok()) << s;
  ModelConfig c = (*ckpt)->config();
  c.intermediate_size = 26;
  s = ValidateParallel(c, 4, 2);
  EXPECT_TRUE(Contains(s, "intermediate_size (26) does not divide over TP 4")) << s;
}

}  // namespace
}  // namespace seam::weights

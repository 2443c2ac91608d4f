// Inputs the weights fuzz targets refused to let through, as unit tests of
// the behaviour each fix gives (their bytes are also seeds of the corpora).
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/weights/model_config.h"
#include "seam/weights/safetensors.h"

namespace seam::weights {
namespace {

std::string SafetensorsBytes(const nlohmann::json& header) {
  const std::string text = header.dump();
  const uint64_t length = text.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + text;
}

TEST(SafetensorsLayout, ShapeWhoseByteCountWrapsIsRefusedNotReadAsEmpty) {
  // 2^62 x 4 f32 elements wrap a 64-bit byte count to 0, the span of [0, 0].
  const std::string bytes = SafetensorsBytes(
      {{"a", {{"dtype", "F32"}, {"shape", {uint64_t{1} << 62, 4}}, {"data_offsets", {0, 0}}}}});
  const absl::StatusOr<SafetensorsLayout> layout = ParseSafetensorsLayout(bytes, "w.safetensors");
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layout.status().message(),
            "w.safetensors: header entry 'a' has a shape [4611686018427387904,4] of more bytes than fit in 63 bits");
}

TEST(SafetensorsLayout, DimensionPastInt64IsRefusedNotReadAsNegative) {
  const std::string bytes = SafetensorsBytes(
      {{"a", {{"dtype", "F32"}, {"shape", {uint64_t{1} << 63, 0}}, {"data_offsets", {0, 0}}}}});
  const absl::StatusOr<SafetensorsLayout> layout = ParseSafetensorsLayout(bytes, "w.safetensors");
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layout.status().message(),
            "w.safetensors: header entry 'a' has a shape [9223372036854775808,0] of more bytes than fit in 63 bits");
}

TEST(SafetensorsLayout, EmptyTensorWithLargeDimensionsIsAccepted) {
  const std::string bytes = SafetensorsBytes(
      {{"a", {{"dtype", "BF16"}, {"shape", {0, uint64_t{1} << 40}}, {"data_offsets", {0, 0}}}}});
  const absl::StatusOr<SafetensorsLayout> layout = ParseSafetensorsLayout(bytes, "w.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->tensors.size(), 1u);
  EXPECT_EQ(layout->tensors[0].shape, (Shape{0, int64_t{1} << 40}));
}

TEST(ModelConfig, FloatFieldPastFloatRangeIsRefusedNotReadAsInfinity) {
  const std::string text = R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000, "rope_theta": 1e300})";
  const absl::StatusOr<ModelConfig> config = ParseModelConfig(text);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), "config.json: field 'rope_theta' must be a number within float range, got 1e+300");
}

}  // namespace
}  // namespace seam::weights

// Checkpoint: single-file and sharded (index JSON) directories, dtype
// conversion, and TP row/column pieces that concatenate to the whole tensor.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"
#include "seam/weights/checkpoint.h"

namespace seam::weights {
namespace {

using seam::testing::TempDir;
using seam::testing::WriteText;

// Values 0, 1, 2, ... (exact in bf16 up to 256) so pieces are easy to check.
Tensor Iota(const Shape& shape, DType dtype, float start = 0) {
  std::vector<float> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i % 256);
  return Tensor::FromFloats(v, shape, dtype);
}

TEST(Checkpoint, LoadsSingleFileAsViewsAndConverts) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(seam::testing::MicroConfig()));
  const Tensor w = Iota({12, 8}, DType::kBF16);
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"), {{"model.layers.0.mlp.up_proj.weight", w}}).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->config().hidden_size, 8);
  EXPECT_TRUE((*ckpt)->Has("model.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE((*ckpt)->Has("lm_head.weight"));

  auto same = (*ckpt)->Load("model.layers.0.mlp.up_proj.weight", {12, 8}, DType::kBF16);
  ASSERT_TRUE(same.ok()) << same.status();
  auto again = (*ckpt)->Load("model.layers.0.mlp.up_proj.weight", {12, 8}, DType::kBF16);
  EXPECT_TRUE(same->SameView(*again));  // both views of the mapping, no copy
  auto f32 = (*ckpt)->Load("model.layers.0.mlp.up_proj.weight", {12, 8}, DType::kF32);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->dtype(), DType::kF32);
  EXPECT_EQ(f32->ToFloats(), w.ToFloats());
}

TEST(Checkpoint, LoadsAcrossShardsOfAnIndex) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(seam::testing::MicroConfig()));
  const Tensor embed = Iota({16, 8}, DType::kBF16), norm = Iota({8}, DType::kBF16, 1), head = Iota({16, 8}, DType::kBF16, 3);
  ASSERT_TRUE(WriteSafetensors(dir.File("model-00001-of-00002.safetensors"),
                               {{"model.embed_tokens.weight", embed}, {"model.norm.weight", norm}}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.File("model-00002-of-00002.safetensors"), {{"lm_head.weight", head}}).ok());
  nlohmann::json index = {{"metadata", {{"total_size", 2 * 16 * 8 * 2 + 16}}},
                          {"weight_map",
                           {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                            {"model.norm.weight", "model-00001-of-00002.safetensors"},
                            {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  WriteText(dir.File("model.safetensors.index.json"), index.dump(2));

  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto e = (*ckpt)->Load("model.embed_tokens.weight", {16, 8}, DType::kBF16);
  auto n = (*ckpt)->Load("model.norm.weight", {8}, DType::kBF16);
  auto h = (*ckpt)->Load("lm_head.weight", {16, 8}, DType::kBF16);
  ASSERT_TRUE(e.ok() && n.ok() && h.ok());
  EXPECT_EQ(e->ToFloats(), embed.ToFloats());
  EXPECT_EQ(n->ToFloats(), norm.ToFloats());
  EXPECT_EQ(h->ToFloats(), head.ToFloats());
  EXPECT_NE(e->storage(), h->storage());  // two files, two mappings
  EXPECT_EQ(e->storage(), n->storage());
}

TEST(Checkpoint, IndexNamingATensorItsShardLacksIsDataLoss) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(seam::testing::MicroConfig()));
  ASSERT_TRUE(WriteSafetensors(dir.File("a.safetensors"), {{"x", Iota({2}, DType::kF32)}}).ok());
  WriteText(dir.File("model.safetensors.index.json"),
            R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}})");
  auto ckpt = Checkpoint::Open(dir.path());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ckpt.status().message().find("'y'"), std::string::npos) << ckpt.status();
}

TEST(Checkpoint, RowAndColumnPiecesConcatenateToTheWhole) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(seam::testing::MicroConfig()));
  const Tensor w = Iota({12, 8}, DType::kBF16);
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"), {{"w", w}}).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  const std::vector<float> whole = w.ToFloats();
  for (int parts : {1, 2, 3, 4}) {
    std::vector<float> rows;
    for (int p = 0; p < parts; ++p) {
      auto piece = (*ckpt)->LoadRows("w", {12, 8}, p, parts, DType::kBF16);
      ASSERT_TRUE(piece.ok()) << piece.status();
      EXPECT_EQ(piece->shape(), (Shape{12 / parts, 8}));
      auto whole_view = (*ckpt)->Load("w", {12, 8}, DType::kBF16);
      EXPECT_EQ(piece->storage(), whole_view->storage());  // zero copy
      const auto f = piece->ToFloats();
      rows.insert(rows.end(), f.begin(), f.end());
    }
    EXPECT_EQ(rows, whole) << parts << " row parts";
  }
  for (int parts : {1, 2, 4, 8}) {
    std::vector<std::vector<float>> cols;
    for (int p = 0; p < parts; ++p) {
      auto piece = (*ckpt)->LoadCols("w", {12, 8}, p, parts, DType::kF32);
      ASSERT_TRUE(piece.ok()) << piece.status();
      EXPECT_EQ(piece->shape(), (Shape{12, 8 / parts}));
      EXPECT_TRUE(piece->is_contiguous());
      cols.push_back(piece->ToFloats());
    }
    std::vector<float> joined;
    for (int r = 0; r < 12; ++r) {
      for (int p = 0; p < parts; ++p) {
        joined.insert(joined.end(), cols[p].begin() + r * (8 / parts), cols[p].begin() + (r + 1) * (8 / parts));
      }
    }
    EXPECT_EQ(joined, whole) << parts << " column parts";
  }
  auto f32_rows = (*ckpt)->LoadRows("w", {12, 8}, 1, 2, DType::kF32);
  ASSERT_TRUE(f32_rows.ok());
  EXPECT_EQ(f32_rows->dtype(), DType::kF32);
}

TEST(Checkpoint, SplitThatDoesNotDivideIsInvalidArgument) {
  TempDir dir;
  WriteText(dir.File("config.json"), ModelConfigToJson(seam::testing::MicroConfig()));
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"), {{"w", Iota({12, 8}, DType::kF32)}}).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  auto rows = (*ckpt)->LoadRows("w", {12, 8}, 0, 5, DType::kF32);
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rows.status().message().find("(12) does not divide into 5 parts"), std::string::npos) << rows.status();
  auto cols = (*ckpt)->LoadCols("w", {12, 8}, 0, 3, DType::kF32);
  EXPECT_EQ(cols.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cols.status().message().find("(8) does not divide into 3 parts"), std::string::npos) << cols.status();
  EXPECT_EQ((*ckpt)->LoadRows("w", {12, 8}, 2, 2, DType::kF32).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::weights

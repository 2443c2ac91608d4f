// Safetensors writer and memory-mapped reader: round trips, zero-copy views,
// the on-disk layout, and the errors for bad files.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "seam/testing/temp_dir.h"
#include "seam/weights/safetensors.h"

namespace seam::weights {
namespace {

using seam::testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A file with one tensor whose header is written by hand.
void WriteRawFile(const std::string& path, const nlohmann::json& header, size_t data_bytes) {
  std::string text = header.dump();
  uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << std::string(data_bytes, '\0');
}

TEST(Safetensors, RoundTripsF32Bf16I32AsZeroCopyViews) {
  TempDir dir;
  const Tensor a = Tensor::FromFloats({1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.125f}, {2, 3}, DType::kF32);
  const Tensor b = Tensor::FromFloats({0.5f, 1.0f, -1.5f, 2.0f}, {4}, DType::kBF16);
  const Tensor c = Tensor::FromInts({7, -3, 1 << 20}, {3, 1});
  ASSERT_TRUE(WriteSafetensors(dir.File("t.safetensors"), {{"a", a}, {"b", b}, {"c", c}}).ok());

  auto file = SafetensorsFile::Open(dir.File("t.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 3u);
  EXPECT_EQ((*file)->tensors()[0].name, "a");  // data in the order given
  EXPECT_EQ((*file)->tensors()[2].name, "c");
  auto va = (*file)->View("a"), vb = (*file)->View("b"), vc = (*file)->View("c");
  ASSERT_TRUE(va.ok() && vb.ok() && vc.ok());
  EXPECT_EQ(va->dtype(), DType::kF32);
  EXPECT_EQ(va->shape(), (Shape{2, 3}));
  EXPECT_EQ(va->ToFloats(), a.ToFloats());
  EXPECT_EQ(vb->dtype(), DType::kBF16);
  EXPECT_EQ(vb->ToFloats(), b.ToFloats());
  EXPECT_EQ(vc->dtype(), DType::kI32);
  EXPECT_EQ(vc->data<int32_t>()[2], 1 << 20);

  // Zero copy: the views sit on the file's one mapping, at the header's offsets.
  EXPECT_EQ(va->storage(), vb->storage());
  const char* base = static_cast<const char*>(va->storage()->data());
  EXPECT_EQ(static_cast<const char*>(vb->raw_data()) - static_cast<const char*>(va->raw_data()),
            static_cast<ptrdiff_t>(a.nbytes()));
  EXPECT_EQ(va->storage()->bytes(), std::filesystem::file_size(dir.File("t.safetensors")));
  EXPECT_GE(static_cast<const char*>(va->raw_data()), base);
}

TEST(Safetensors, ViewsOutliveTheFileObject) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.File("t.safetensors"), {{"w", Tensor::FromFloats({1, 2, 3, 4}, {2, 2})}}).ok());
  Tensor view;
  {
    auto file = SafetensorsFile::Open(dir.File("t.safetensors"));
    ASSERT_TRUE(file.ok());
    view = *(*file)->View("w");
  }
  EXPECT_EQ(view.ToFloats(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Safetensors, LayoutHasMetadataAndHeaderPaddedToEightBytes) {
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir.File("t.safetensors"), {{"x", Tensor::FromFloats({1, 2, 3}, {3})}}).ok());
  const std::string bytes = ReadAll(dir.File("t.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"format", "pt"}}));
  EXPECT_EQ(header["x"]["dtype"], "F32");
  EXPECT_EQ(header["x"]["shape"], nlohmann::json::array({3}));
  EXPECT_EQ(header["x"]["data_offsets"], nlohmann::json::array({0, 12}));
}

TEST(Safetensors, MisalignedTensorIsServedAsAlignedCopy) {
  TempDir dir;
  const Tensor odd = Tensor::FromFloats({1, 2, 3}, {3}, DType::kBF16);  // 6 bytes: next tensor misaligned
  const Tensor f = Tensor::FromFloats({0.25f, -8.0f}, {2});
  ASSERT_TRUE(WriteSafetensors(dir.File("t.safetensors"), {{"odd", odd}, {"f", f}}).ok());
  auto file = SafetensorsFile::Open(dir.File("t.safetensors"));
  ASSERT_TRUE(file.ok());
  auto v = (*file)->View("f");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v->raw_data()) % 4, 0u);
  EXPECT_EQ(v->ToFloats(), f.ToFloats());
}

TEST(Safetensors, MissingFileIsNotFound) {
  auto file = SafetensorsFile::Open("/nonexistent/seam/model.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/seam/model.safetensors"), std::string::npos);
}

TEST(Safetensors, UnsupportedDtypeIsUnimplementedNamingDtypeAndTensor) {
  TempDir dir;
  WriteRawFile(dir.File("t.safetensors"),
               {{"w64", {{"dtype", "F64"}, {"shape", nlohmann::json::array({2})}, {"data_offsets", {0, 16}}}}}, 16);
  auto file = SafetensorsFile::Open(dir.File("t.safetensors"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(file.status().message().find("F64"), std::string::npos) << file.status();
  EXPECT_NE(file.status().message().find("'w64'"), std::string::npos) << file.status();
}

TEST(Safetensors, TruncatedFileIsDataLossNamingFileAndTensor) {
  TempDir dir;
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"a", Tensor::Zeros({4}, DType::kF32)}, {"b", Tensor::Zeros({8}, DType::kF32)}}).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find(path), std::string::npos) << file.status();
  EXPECT_NE(file.status().message().find("'b'"), std::string::npos) << file.status();

  std::filesystem::resize_file(path, 20);  // inside the header
  EXPECT_EQ(SafetensorsFile::Open(path).status().code(), absl::StatusCode::kDataLoss);
  std::filesystem::resize_file(path, 3);  // not even the header length
  EXPECT_EQ(SafetensorsFile::Open(path).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Safetensors, ByteRangeThatDisagreesWithShapeIsDataLoss) {
  TempDir dir;
  WriteRawFile(dir.File("t.safetensors"), {{"w", {{"dtype", "F32"}, {"shape", nlohmann::json::array({3})}, {"data_offsets", {0, 8}}}}}, 8);
  auto file = SafetensorsFile::Open(dir.File("t.safetensors"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find("'w' [3]"), std::string::npos) << file.status();
}

TEST(Safetensors, MalformedHeaderIsInvalidArgument) {
  TempDir dir;
  WriteRawFile(dir.File("t.safetensors"), {{"w", {{"shape", nlohmann::json::array({3})}}}}, 0);
  EXPECT_EQ(SafetensorsFile::Open(dir.File("t.safetensors")).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Safetensors, WriterRefusesRepeatedNames) {
  TempDir dir;
  const Tensor t = Tensor::Zeros({1}, DType::kF32);
  EXPECT_EQ(WriteSafetensors(dir.File("t.safetensors"), {{"x", t}, {"x", t}}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::weights

#include "seam/core/tensor.h"

#include <gtest/gtest.h>

#include "seam/core/device_memory.h"

namespace seam {
namespace {

TEST(Tensor, EmptyHasShapeDTypeAndContiguousStrides) {
  Tensor t = Tensor::Empty({7, 96}, DType::kBF16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (Shape{7, 96}));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{96, 1}));
  EXPECT_EQ(t.nbytes(), 7u * 96u * 2u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.DebugString(), "bf16[7, 96] cpu");
}

TEST(Tensor, RowsViewSharesStorage) {
  Tensor t = Tensor::FromFloats({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor mid = t.Rows(1, 1);
  EXPECT_EQ(mid.shape(), (Shape{1, 2}));
  EXPECT_EQ(mid.ToFloats(), (std::vector<float>{2, 3}));
  mid.data<float>()[0] = 42;
  EXPECT_EQ(t.FlatAt(2), 42);
}

TEST(Tensor, NarrowColumnsIsStridedAndCopiesCorrectly) {
  Tensor t = Tensor::FromFloats({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor cols = t.Narrow(1, 1, 2);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.ToFloats(), (std::vector<float>{1, 2, 4, 5}));
  Tensor c = cols.Clone();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.ToFloats(), (std::vector<float>{1, 2, 4, 5}));
}

TEST(Tensor, ReshapeInfersAndRejectsMismatch) {
  Tensor t = Tensor::Zeros({4, 6}, DType::kF32);
  auto r = t.Reshape({2, -1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{2, 12}));
  auto bad = t.Reshape({5, 5});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("has 25 elements"), std::string::npos) << bad.status();
  auto strided = t.Narrow(1, 0, 3).Reshape({12});
  EXPECT_EQ(strided.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Tensor, CopyConvertsDTypeOnHost) {
  Tensor src = Tensor::FromFloats({1.5f, -2.25f, 3.0f}, {3});
  Tensor dst = Tensor::Empty({3}, DType::kBF16);
  ASSERT_TRUE(CopyInto(src, dst).ok());
  EXPECT_EQ(dst.ToFloats(), (std::vector<float>{1.5f, -2.25f, 3.0f}));
}

TEST(Tensor, ExpectHelpersNameTheTensorAndTheSizes) {
  Tensor t = Tensor::Zeros({7, 95}, DType::kF32);
  absl::Status s = ExpectShape(t, {7, 96}, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x: expected shape [7, 96], got [7, 95]");
  s = ExpectDType(t, DType::kBF16, "residual");
  EXPECT_EQ(s.message(), "residual: expected dtype bf16, got f32");
  s = ExpectDefined(Tensor(), "weight");
  EXPECT_EQ(s.message(), "weight: tensor is undefined");
}

TEST(Tensor, CudaTensorWithoutGpuIsAnError) {
  if (CudaAvailable()) GTEST_SKIP() << "a GPU is present";
  auto t = Tensor::TryEmpty({4}, DType::kF32, Device::CUDA(0));
  EXPECT_FALSE(t.ok());
}

TEST(Tensor, ZeroRowTensorsAreValid) {
  Tensor t = Tensor::Empty({0, 96}, DType::kF32);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.Rows(0, 0).numel(), 0);
  EXPECT_TRUE(CopyInto(t, Tensor::Empty({0, 96}, DType::kBF16)).ok());
}

}  // namespace
}  // namespace seam

namespace seam {
namespace {

TEST(TensorOn, SharesATensorAlreadyOnTheDevice) {
  const Tensor t = Tensor::FromFloats({1, 2, 3}, {3});
  absl::StatusOr<Tensor> same = t.On(Device::CPU());
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->raw_data(), t.raw_data());
  absl::StatusOr<Tensor> copy = t.To(Device::CPU());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_NE(copy->raw_data(), t.raw_data());
}

}  // namespace
}  // namespace seam

namespace seam {
namespace {

// A column block of a device matrix (rows contiguous, spaced apart) copies
// with one 2-D copy, both device to device (Clone) and device to host.
TEST(TensorCopy, ColumnBlockOfADeviceTensorCopies) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  std::vector<float> values(5 * 7);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  absl::StatusOr<Tensor> gpu = Tensor::FromFloats(values, {5, 7}).To(Device::CUDA(0));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const Tensor block = gpu->Narrow(1, 2, 3);
  absl::StatusOr<Tensor> host = block.Clone().To(Device::CPU());
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<Tensor> direct = block.To(Device::CPU());
  ASSERT_TRUE(direct.ok()) << direct.status();
  std::vector<float> want;
  for (int r = 0; r < 5; ++r) {
    for (int c = 2; c < 5; ++c) want.push_back(static_cast<float>(r * 7 + c));
  }
  EXPECT_EQ(host->ToFloats(), want);
  EXPECT_EQ(direct->ToFloats(), want);
}

}  // namespace
}  // namespace seam

// MHC's update and read on CUDA tensors, through the same MhcUpdate / MhcRead
// objects the layer stack uses, against the host run of the same objects:
// with dyadic streams and coefficients every mix is exact, so the device
// residual, read and stack-entry streams equal the host's bit for bit (the
// norm after the read within 1e-5 of its scale: the device reduces its sum
// of squares in another order). Skips without a GPU.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "seam/boundary/mhc.h"
#include "seam/core/device_memory.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {
namespace {

const Device kGpu = Device::CUDA(0);

Tensor Host(const Tensor& t) { return *t.On(Device::CPU()); }
bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

class MhcGpu : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  }
};

TEST_P(MhcGpu, UpdateReadAndInitOnTheDeviceEqualTheHost) {
  const int n = GetParam();
  const int64_t rows = 7;
  NormParams norm;
  norm.weight = Tensor::FromFloats(DyadicValues(5, kHidden, 0.25f, 2.0f), {kHidden});
  norm.eps = 1.0f / 1024;
  NormParams gnorm{*norm.weight.On(kGpu), norm.eps};
  const MhcCoefficients c = MhcCoefficientsOf(3, 0, 1, n);
  auto update = *MhcUpdate::Make(c);
  auto read = *MhcRead::Make(c, &norm);
  auto gread = *MhcRead::Make(c, &gnorm);

  const Tensor input = Tensor::FromFloats(DyadicValues(9, rows * kHidden, 0.125f, 2.0f), {rows, kHidden});
  Tensor streams = *read->InitResidual(input);
  Tensor gstreams = *gread->InitResidual(*input.On(kGpu));
  EXPECT_TRUE(SameBits(Host(gstreams), streams)) << "init_residual";

  const Tensor y = Tensor::FromFloats(DyadicValues(11, rows * kHidden, 0.125f, 1.0f), {rows, kHidden});
  ASSERT_TRUE(update->Apply(y, streams).ok());
  const absl::Status s = update->Apply(*y.On(kGpu), gstreams);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(SameBits(Host(gstreams), streams)) << "post mix";

  Tensor out = Tensor::Empty({rows, kHidden}, DType::kF32);
  Tensor gout = Tensor::Empty({rows, kHidden}, DType::kF32, kGpu);
  ASSERT_TRUE(read->Read(streams, out).ok());
  ASSERT_TRUE(gread->Read(gstreams, gout).ok());
  const std::vector<float> a = Host(gout).ToFloats(), b = out.ToFloats();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  EXPECT_LE(worst, 1e-5 * scale) << "read";
}

INSTANTIATE_TEST_SUITE_P(Streams, MhcGpu, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace seam::boundary::testing

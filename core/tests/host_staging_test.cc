// Host staging memory: usable host tensors of any size, blocks reused after
// release, page-locked exactly when asked and a GPU is visible, and To(host)
// from a GPU lands in the page-locked cache.
#include "seam/core/host_staging.h"

#include <gtest/gtest.h>

#include "seam/core/device_memory.h"

namespace seam {
namespace {

TEST(HostStagingTest, GivesWritableHostTensorsOfAnySize) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{300000}}) {
    auto t = EmptyHostStaging({n}, DType::kF32, false);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE(t->device().is_cpu());
    EXPECT_EQ(t->numel(), n);
    float* p = static_cast<float*>(t->raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i);
    if (n > 0) EXPECT_EQ(p[n - 1], static_cast<float>(n - 1));
  }
  EXPECT_FALSE(EmptyHostStaging({-1}, DType::kF32, false).ok());
}

TEST(HostStagingTest, ReusesAReleasedBlockOfTheSameClass) {
  void* first = nullptr;
  {
    auto t = EmptyHostStaging({5000}, DType::kF32, false);  // 20000 bytes: the 32 KiB class
    ASSERT_TRUE(t.ok());
    first = t->raw_data();
  }
  auto again = EmptyHostStaging({6000}, DType::kF32, false);  // 24000 bytes: the same class
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->raw_data(), first);
}

TEST(HostStagingTest, GivesLargeRequestsTooUncached) {
  const int64_t n = int64_t{kMaxStagingBlockBytes} / 4 + 1;
  auto t = EmptyHostStaging({n}, DType::kF32, true);
  ASSERT_TRUE(t.ok()) << t.status();
  float* p = static_cast<float*>(t->raw_data());
  p[0] = 1.0f;
  p[n - 1] = 2.0f;
  EXPECT_EQ(p[n - 1], 2.0f);
}

TEST(HostStagingTest, PageLockedExactlyWhenAskedAndAGpuIsVisible) {
  EXPECT_EQ(HostStagingCanPageLock(), CudaAvailable());
  for (bool page_locked : {false, true}) {
    auto t = EmptyHostStaging({100}, DType::kF32, page_locked);
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(t->device().is_cpu());
  }
}

TEST(HostStagingTest, CopiesOffAGpuLandInStagingMemory) {
  if (!CudaAvailable()) GTEST_SKIP() << "needs a GPU";
  const Tensor host = Tensor::FromFloats({1.0f, 2.0f, 3.0f}, {3});
  auto gpu = host.To(Device::CUDA(0));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  void* staged = nullptr;
  {
    auto back = gpu->To(Device::CPU());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->ToFloats(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
    staged = back->raw_data();
  }
  auto block = EmptyHostStaging({3}, DType::kF32, true);  // the block the copy released
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->raw_data(), staged);
}

}  // namespace
}  // namespace seam

// seam bench serve's in-process baseline on LongCat-Flash (MLA over a latent
// cache, a MoE with zero experts routed on the device): on GPU 0 at TP 1 it
// replays CUDA-graph decode steps, and says so; a model whose experts run
// one by one records no graph and decodes eagerly instead of failing to
// capture. Skipped without a GPU; on the host the StageGroup driver runs it.
#include "in_process_decode.h"

#include <gtest/gtest.h>

#include <string>

#include "seam/core/device_memory.h"

namespace seam::cli {
namespace {

const std::string kFixture = std::string(SEAM_FIXTURES_DIR) + "/golden/longcat_flash";

InProcessOptions Options(Device::Kind device) {
  InProcessOptions o;
  o.model_dir = kFixture;
  o.device = device;
  o.prompt_len = 8;
  o.new_tokens = 4;
  o.max_batch = 3;
  return o;
}

TEST(InProcessDecode, LongcatFlashDecodesOnTheHost) {
  auto d = InProcessDecode::Create(Options(Device::Kind::kCPU));
  ASSERT_TRUE(d.ok()) << d.status();
  for (int batch : {1, 3}) {
    auto f = (*d)->Measure(batch);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_GT(f->tokens_per_s, 0);
  }
}

TEST(InProcessDecode, LongcatFlashDecodesFromGraphsOnTheGpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  auto d = InProcessDecode::Create(Options(Device::Kind::kCUDA));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE((*d)->Describe().find("CUDA-graph decode"), std::string::npos) << (*d)->Describe();
  for (int batch : {1, 3}) {
    auto f = (*d)->Measure(batch);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_GT(f->tokens_per_s, 0);
  }
}

}  // namespace
}  // namespace seam::cli

// LongCat-Flash's pieces that need no ranks: the latent KV cache's sizing
// (its router is kernels::MoeRouteBiased: kernels/tests/zero_experts_test.cc).
#include <gtest/gtest.h>

#include "seam/models/kv_cache.h"
#include "src/longcat_layers.h"

namespace seam::models::internal {
namespace {

TEST(LatentKvCache, ABlockCostsOneLatentRowPerTokenAndLayer) {
  KvCacheOptions options;
  options.block_size = 16;
  options.budget_bytes = 4 * 16 * 40 * 4 * 10 + 100;  // ten blocks of 4 layers, rows of 40 f32
  auto cache = KvCache::CreateLatent(4, 40, options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_TRUE((*cache)->is_latent());
  EXPECT_EQ((*cache)->bytes_per_block(), 4 * 16 * 40 * 4);
  EXPECT_EQ((*cache)->num_blocks(), 10);
  EXPECT_EQ((*cache)->latent(3).shape(), (Shape{10, 16, 40}));
  // The same budget as a GQA cache of 4 heads of 24 (q·k of nope 16 + rope 8, v 24) holds far fewer blocks.
  auto gqa = KvCache::Create(4, 4, 24, options);
  ASSERT_TRUE(gqa.ok());
  EXPECT_LT((*gqa)->num_blocks(), (*cache)->num_blocks());
  EXPECT_EQ(KvCache::CreateLatent(4, 0, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::models::internal

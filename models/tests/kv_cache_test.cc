// KvCache: block accounting, slot mapping and refusal when full.
#include "seam/models/kv_cache.h"

#include <gtest/gtest.h>

namespace seam::models {
namespace {

KvCacheOptions Options(int64_t blocks, int64_t block_size) {
  KvCacheOptions o;
  o.block_size = block_size;
  o.budget_bytes = blocks * 2 * 2 * block_size * 1 * 4 * 4;  // 2 layers, k+v, 1 head, head_dim 4, f32
  return o;
}

TEST(KvCache, BudgetGivesBlocksAndShapes) {
  auto cache = KvCache::Create(2, 1, 4, Options(5, 4));
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->num_blocks(), 5);
  EXPECT_EQ((*cache)->free_blocks(), 5);
  EXPECT_EQ((*cache)->k(1).shape(), (Shape{5, 4, 1, 4}));
}

TEST(KvCache, BudgetBelowOneBlockIsInvalid) {
  KvCacheOptions o = Options(1, 4);
  o.budget_bytes -= 1;
  auto cache = KvCache::Create(2, 1, 4, o);
  ASSERT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cache.status().message().find("one block needs 256 bytes"), std::string::npos) << cache.status();
}

TEST(KvCache, ReserveGrowsTablesAndBatchMapsSlots) {
  auto made = KvCache::Create(2, 1, 4, Options(8, 4));
  ASSERT_TRUE(made.ok());
  KvCache& cache = **made;
  const std::vector<CacheSpan> prefill{{7, 0, 6}, {9, 0, 2}};
  ASSERT_TRUE(cache.Reserve(prefill).ok());
  EXPECT_EQ(cache.free_blocks(), 5);
  EXPECT_EQ(cache.Capacity(7), 8);
  ASSERT_TRUE(cache.Reserve(prefill).ok());  // idempotent
  EXPECT_EQ(cache.free_blocks(), 5);

  const std::vector<CacheSpan> decode{{9, 2, 1}, {7, 6, 3}};  // 7 grows into a third block
  ASSERT_TRUE(cache.Reserve(decode).ok());
  EXPECT_EQ(cache.free_blocks(), 4);
  auto batch = cache.BuildBatch(decode);
  ASSERT_TRUE(batch.ok()) << batch.status();
  // Blocks are handed out lowest first: 7 → {0, 1, 3}, 9 → {2}.
  EXPECT_EQ(batch->slot_mapping.ToFloats(), (std::vector<float>{2 * 4 + 2, 1 * 4 + 2, 1 * 4 + 3, 3 * 4 + 0}));
  EXPECT_EQ(batch->positions.ToFloats(), (std::vector<float>{2, 6, 7, 8}));
  EXPECT_EQ(batch->attention.query_start.ToFloats(), (std::vector<float>{0, 1, 4}));
  EXPECT_EQ(batch->attention.context_lens.ToFloats(), (std::vector<float>{3, 9}));
  EXPECT_EQ(batch->attention.block_tables.shape(), (Shape{2, 3}));
  EXPECT_EQ(batch->attention.block_tables.ToFloats(), (std::vector<float>{2, 0, 0, 0, 1, 3}));

  ASSERT_TRUE(cache.Free(7).ok());
  EXPECT_EQ(cache.free_blocks(), 7);
  EXPECT_EQ(cache.Free(7).code(), absl::StatusCode::kNotFound);
}

TEST(KvCache, FullCacheIsResourceExhaustedAndKeepsItsState) {
  auto made = KvCache::Create(2, 1, 4, Options(3, 4));
  ASSERT_TRUE(made.ok());
  KvCache& cache = **made;
  ASSERT_TRUE(cache.Reserve({{1, 0, 8}}).ok());
  const absl::Status full = cache.Reserve({{1, 8, 1}, {2, 0, 9}});
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(full.message(), "KV cache full: the step needs 4 more blocks, 1 of 3 are free");
  EXPECT_EQ(cache.free_blocks(), 1);  // all or nothing
  EXPECT_FALSE(cache.Has(2));
}

TEST(KvCache, BatchOfUnreservedSpanIsFailedPrecondition) {
  auto made = KvCache::Create(2, 1, 4, Options(3, 4));
  ASSERT_TRUE(made.ok());
  EXPECT_EQ((*made)->BuildBatch({{4, 0, 2}}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace seam::models

// KvCache's cached blocks: a published block outlives its sequence until it
// is evicted, a sharing sequence maps the same block, and each refusal says why.
#include <gtest/gtest.h>

#include "seam/models/kv_cache.h"

namespace seam::models {
namespace {

std::unique_ptr<KvCache> Cache(int64_t blocks) {
  KvCacheOptions o;
  o.block_size = 4;
  o.budget_bytes = blocks * 2 * 2 * 4 * 1 * 4 * 4;  // 2 layers, k+v, 4 tokens, 1 head, head_dim 4, f32
  auto made = KvCache::Create(2, 1, 4, o);
  EXPECT_TRUE(made.ok()) << made.status();
  return std::move(made).value();
}

// The block table of `sequence`, read through a one-token batch at its last capacity.
std::vector<int32_t> TableOf(const KvCache& cache, uint64_t sequence) {
  const int64_t tokens = cache.Capacity(sequence);
  auto plan = cache.PlanBatch({{sequence, tokens - 1, 1}});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? plan->block_tables : std::vector<int32_t>{};
}

TEST(KvCacheSharing, APublishedBlockOutlivesItsSequenceAndIsMappedByTheNext) {
  auto cache = Cache(6);
  ASSERT_TRUE(cache->Reserve({{1, 0, 10}}).ok());  // 3 blocks
  const std::vector<int32_t> first = TableOf(*cache, 1);
  ASSERT_TRUE(cache->Publish(1, 0, 100).ok());
  ASSERT_TRUE(cache->Publish(1, 1, 101).ok());
  ASSERT_TRUE(cache->Free(1).ok());
  EXPECT_EQ(cache->free_blocks(), 4);  // the two cached blocks stay
  EXPECT_EQ(cache->cached_blocks(), 2);
  ASSERT_TRUE(cache->Share(2, {100, 101}).ok());
  ASSERT_TRUE(cache->Reserve({{2, 8, 3}}).ok());  // the suffix: one more block
  const std::vector<int32_t> second = TableOf(*cache, 2);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(second[1], first[1]);
  EXPECT_EQ(cache->free_blocks(), 3);
}

TEST(KvCacheSharing, ABlockReturnsOnlyWhenNeitherCachedNorHeld) {
  auto cache = Cache(4);
  ASSERT_TRUE(cache->Reserve({{1, 0, 4}}).ok());
  ASSERT_TRUE(cache->Publish(1, 0, 7).ok());
  ASSERT_TRUE(cache->Share(2, {7}).ok());
  ASSERT_TRUE(cache->Evict(7).ok());
  EXPECT_EQ(cache->free_blocks(), 3);  // sequences 1 and 2 still hold it
  ASSERT_TRUE(cache->Free(1).ok());
  EXPECT_EQ(cache->free_blocks(), 3);
  ASSERT_TRUE(cache->Free(2).ok());
  EXPECT_EQ(cache->free_blocks(), 4);
}

TEST(KvCacheSharing, RefusalsNameWhatIsWrong) {
  auto cache = Cache(4);
  ASSERT_TRUE(cache->Reserve({{1, 0, 4}}).ok());
  absl::Status s = cache->Share(2, {9});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("cached block 9, which is not cached"), std::string::npos) << s;
  EXPECT_FALSE(cache->Has(2));  // all or nothing
  ASSERT_TRUE(cache->Publish(1, 0, 9).ok());
  s = cache->Share(1, {9});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  s = cache->Publish(1, 0, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  s = cache->Publish(1, 1, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  s = cache->Publish(5, 0, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  s = cache->Evict(10);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

}  // namespace
}  // namespace seam::models

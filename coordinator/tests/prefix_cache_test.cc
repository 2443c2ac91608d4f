// PrefixCache decisions: chains, salts, references and LRU eviction.
#include "prefix_cache.h"

#include <vector>

#include "gtest/gtest.h"

namespace seam::coordinator {
namespace {

std::vector<int32_t> Tokens(int n, int32_t first = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

// Caches every full block of `tokens` on group 0; returns their ids.
std::vector<uint64_t> CacheAll(PrefixCache& cache, const std::vector<int32_t>& tokens, const std::string& salt = "") {
  std::vector<uint64_t> ids;
  uint64_t parent = 0;
  for (size_t b = 0; (b + 1) * cache.BlockSize() <= tokens.size(); ++b) {
    parent = cache.Insert(0, parent, tokens.data() + b * cache.BlockSize(), salt).first;
    ids.push_back(parent);
  }
  return ids;
}

TEST(PrefixCache, MatchesTheLongestCachedRunOfFullBlocks) {
  PrefixCache cache(1, 4);
  const std::vector<uint64_t> ids = CacheAll(cache, Tokens(10));  // 2 full blocks
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(cache.Match(0, Tokens(12), "", 100), ids);
  EXPECT_EQ(cache.Match(0, Tokens(12), "", 1), std::vector<uint64_t>{ids[0]});
  EXPECT_TRUE(cache.Match(0, Tokens(3), "", 100).empty());  // no full block
  std::vector<int32_t> other = Tokens(12);
  other[5] = 99;  // the second block differs
  EXPECT_EQ(cache.Match(0, other, "", 100), std::vector<uint64_t>{ids[0]});
}

TEST(PrefixCache, ABlockMatchesOnlyAfterItsOwnPrefix) {
  PrefixCache cache(1, 2);
  CacheAll(cache, {1, 2, 3, 4});
  // Block {3, 4} is cached after {1, 2}: as a first block it is a miss.
  EXPECT_TRUE(cache.Match(0, {3, 4, 5, 6}, "", 100).empty());
}

TEST(PrefixCache, DifferentSaltsShareNothing) {
  PrefixCache cache(1, 4);
  CacheAll(cache, Tokens(8), "tenant-a");
  EXPECT_EQ(cache.Match(0, Tokens(8), "tenant-a", 100).size(), 2u);
  EXPECT_TRUE(cache.Match(0, Tokens(8), "tenant-b", 100).empty());
  EXPECT_TRUE(cache.Match(0, Tokens(8), "", 100).empty());
}

TEST(PrefixCache, GroupsAreSeparate) {
  PrefixCache cache(2, 4);
  CacheAll(cache, Tokens(8));
  EXPECT_TRUE(cache.Match(1, Tokens(8), "", 100).empty());
  EXPECT_EQ(cache.Cached(0), 2);
  EXPECT_EQ(cache.Cached(1), 0);
}

TEST(PrefixCache, InsertingAnEqualBlockReturnsTheCachedOne) {
  PrefixCache cache(1, 4);
  const std::vector<uint64_t> ids = CacheAll(cache, Tokens(4));
  const std::vector<int32_t> same = Tokens(4);
  const auto [id, inserted] = cache.Insert(0, 0, same.data(), "");
  EXPECT_FALSE(inserted);
  EXPECT_EQ(id, ids[0]);
  EXPECT_EQ(cache.Cached(0), 1);
}

TEST(PrefixCache, OnlyUnreferencedBlocksAreEvictedTailFirst) {
  PrefixCache cache(1, 2);
  const std::vector<uint64_t> a = CacheAll(cache, Tokens(6));  // 3 blocks, one reference each
  EXPECT_EQ(cache.Evictable(0), 0);
  EXPECT_TRUE(cache.Evict(0, 5).empty());
  cache.Release(0, a);
  EXPECT_EQ(cache.Evictable(0), 3);
  EXPECT_EQ(cache.Unreferenced(0, a), 3);
  // The chain's tail goes first, so its head stays matchable longest.
  EXPECT_EQ(cache.Evict(0, 1), std::vector<uint64_t>{a[2]});
  EXPECT_EQ(cache.Match(0, Tokens(6), "", 100), (std::vector<uint64_t>{a[0], a[1]}));
  cache.Acquire(0, {a[0]});
  EXPECT_EQ(cache.Evict(0, 5), std::vector<uint64_t>{a[1]});  // a[0] is held again
  EXPECT_EQ(cache.Cached(0), 1);
  cache.Release(0, {a[0]});
  EXPECT_EQ(cache.Evict(0, 5), std::vector<uint64_t>{a[0]});
  EXPECT_TRUE(cache.Match(0, Tokens(6), "", 100).empty());
}

TEST(PrefixCache, LeastRecentlyReleasedIsEvictedFirst) {
  PrefixCache cache(1, 2);
  const std::vector<uint64_t> a = CacheAll(cache, {1, 1});
  const std::vector<uint64_t> b = CacheAll(cache, {2, 2});
  cache.Release(0, b);
  cache.Release(0, a);
  EXPECT_EQ(cache.Evict(0, 1), b);
}

TEST(PrefixCache, ClearForgetsEveryBlockAndIdsAreNeverReused) {
  PrefixCache cache(1, 2);
  const std::vector<uint64_t> a = CacheAll(cache, {1, 1});
  cache.Clear();
  EXPECT_EQ(cache.Cached(0), 0);
  EXPECT_TRUE(cache.Match(0, {1, 1}, "", 100).empty());
  const std::vector<uint64_t> b = CacheAll(cache, {1, 1});
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace seam::coordinator

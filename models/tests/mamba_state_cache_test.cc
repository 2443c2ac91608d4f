// The Mamba state beside the KV cache: sized from the same budget, a zeroed
// slot per sequence taken with its first span and returned with its blocks,
// the step's slots in the batch, and all-or-nothing refusal when full.
#include <gtest/gtest.h>

#include "seam/models/kv_cache.h"

namespace seam::models {
namespace {

MambaStateShape Shape2() { return MambaStateShape{2, 3, 8, 2, 4, 4}; }  // 2 layers, K-1 3, C 8, H 2, P 4, N 4

TEST(MambaStateCache, SharesTheBudgetWithTheBlocks) {
  const int64_t each = Shape2().BytesPerSequence();
  EXPECT_EQ(each, 2 * (3 * 8 + 2 * 4 * 4) * 4);
  KvCacheOptions o;
  o.block_size = 4;
  o.max_state_sequences = 3;
  o.budget_bytes = 3 * each + 10 * (2 * 1 * 4 * 1 * 4 * 4);  // 3 slots and 10 blocks of 1 layer
  auto cache = KvCache::Create(1, 1, 4, o, Shape2());
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->num_blocks(), 10);
  ASSERT_NE((*cache)->states(), nullptr);
  EXPECT_EQ((*cache)->states()->slots(), 3);
  EXPECT_EQ((*cache)->states()->conv(1).shape(), (seam::Shape{3, 3, 8}));
  EXPECT_EQ((*cache)->states()->ssm(0).shape(), (seam::Shape{3, 2, 4, 4}));
}

TEST(MambaStateCache, SequencesTakeZeroedSlotsAndGiveThemBack) {
  KvCacheOptions o;
  o.block_size = 4;
  o.max_state_sequences = 2;
  o.budget_bytes = 2 * Shape2().BytesPerSequence() + 8 * 128;
  auto made = KvCache::Create(1, 1, 4, o, Shape2());
  ASSERT_TRUE(made.ok()) << made.status();
  KvCache& cache = **made;
  ASSERT_TRUE(cache.Reserve({{7, 0, 5}, {9, 0, 2}}).ok());
  auto batch = cache.PlanBatch({{7, 0, 5}, {9, 0, 2}});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->state_slots, (std::vector<int32_t>{0, 1}));
  // Dirty slot 0, free its sequence, and a new one gets it back zeroed.
  cache.states()->ssm(0).data<float>()[0] = 5.0f;
  cache.states()->conv(1).data<float>()[0] = 3.0f;
  EXPECT_EQ(cache.StatesNeeded({{11, 0, 1}}), 1);
  const int64_t free_blocks = cache.free_blocks();
  auto full = cache.Reserve({{11, 0, 1}});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("Mamba state full: the step needs 1 more sequence slots, 0 of 2 are free"),
            std::string::npos) << full;
  EXPECT_EQ(cache.free_blocks(), free_blocks);  // nothing taken
  ASSERT_TRUE(cache.Free(7).ok());
  ASSERT_TRUE(cache.Reserve({{11, 0, 1}}).ok());
  EXPECT_EQ(cache.states()->SlotOf(11), 0);
  EXPECT_EQ(cache.states()->ssm(0).data<float>()[0], 0.0f);
  EXPECT_EQ(cache.states()->conv(1).data<float>()[0], 0.0f);
  auto built = cache.BuildBatch({{9, 2, 1}, {11, 0, 1}});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->state_slots.data<int32_t>()[0], 1);
  EXPECT_EQ(built->state_slots.data<int32_t>()[1], 0);
}

TEST(MambaStateCache, WithoutMambaLayersTheBatchNamesNoSlot) {
  KvCacheOptions o;
  o.block_size = 4;
  auto cache = KvCache::Create(1, 1, 4, o);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->states(), nullptr);
  ASSERT_TRUE((*cache)->Reserve({{1, 0, 3}}).ok());
  EXPECT_EQ((*cache)->PlanBatch({{1, 0, 3}})->state_slots, (std::vector<int32_t>{-1}));
}

}  // namespace
}  // namespace seam::models

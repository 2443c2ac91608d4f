// WriteKvCache: rows land at their flat slots (block · block_size + offset),
// negative slots skip padding tokens, out-of-range slots are rejected.
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::RandomTensor;

TEST(WriteKvCache, StoresRowsAtTheirSlotsAndSkipsNegativeSlots) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor k = RandomTensor({4, 2, 80}, dtype, 71);
    const Tensor v = RandomTensor({4, 2, 80}, dtype, 72);
    const Tensor k_cache = Tensor::Zeros({3, 16, 2, 80}, dtype);
    const Tensor v_cache = Tensor::Zeros({3, 16, 2, 80}, dtype);
    // Token 1 is padding; token 3 lands at block 2, offset 15 (the last slot).
    const std::vector<int32_t> slots = {17, -1, 0, 47};
    ASSERT_TRUE(WriteKvCache(k, v, Tensor::FromInts(slots, {4}), k_cache, v_cache).ok());
    const std::vector<float> kc = k_cache.ToFloats(), vc = v_cache.ToFloats();
    const std::vector<float> kf = k.ToFloats(), vf = v.ToFloats();
    const int64_t row = 2 * 80;
    std::vector<float> want_k(kc.size(), 0.0f), want_v(vc.size(), 0.0f);
    for (int t = 0; t < 4; ++t) {
      if (slots[t] < 0) continue;
      std::copy(kf.begin() + t * row, kf.begin() + (t + 1) * row, want_k.begin() + slots[t] * row);
      std::copy(vf.begin() + t * row, vf.begin() + (t + 1) * row, want_v.begin() + slots[t] * row);
    }
    EXPECT_EQ(kc, want_k) << DTypeName(dtype);  // copies: exact
    EXPECT_EQ(vc, want_v) << DTypeName(dtype);
  }
}

TEST(WriteKvCache, ConvertsRowsToTheCacheDtype) {
  const Tensor k = RandomTensor({2, 2, 64}, DType::kF32, 73);
  const Tensor k_cache = Tensor::Zeros({1, 16, 2, 64}, DType::kBF16);
  const Tensor v_cache = Tensor::Zeros({1, 16, 2, 64}, DType::kBF16);
  ASSERT_TRUE(WriteKvCache(k, k, Tensor::FromInts({3, 4}, {2}), k_cache, v_cache).ok());
  const std::vector<float> kf = k.ToFloats(), kc = k_cache.ToFloats();
  for (int i = 0; i < 2 * 2 * 64; ++i) {
    ASSERT_EQ(kc[3 * 128 + i], BF16ToFloat(FloatToBF16(kf[i]))) << i;  // one rounding
  }
}

TEST(WriteKvCache, RejectsASlotPastTheCache) {
  const Tensor k = RandomTensor({2, 2, 64}, DType::kF32, 74);
  const Tensor cache = Tensor::Zeros({2, 16, 2, 64}, DType::kF32);
  const absl::Status s = WriteKvCache(k, k, Tensor::FromInts({3, 32}, {2}), cache, cache);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "slot_mapping[1] = 32 is past the cache's 32 slots");
}

TEST(WriteKvCache, ZeroTokensAreAccepted) {
  const Tensor cache = Tensor::Zeros({2, 16, 2, 64}, DType::kF32);
  const Tensor none = Tensor::Empty({0, 2, 64}, DType::kF32);
  EXPECT_TRUE(WriteKvCache(none, none, Tensor::FromInts({}, {0}), cache, cache).ok());
}

}  // namespace
}  // namespace seam::kernels

// The fused attention input (QkvNormRopeCache) on CUDA against the CPU op,
// which is the composition of the separate RmsNorm, RotaryEmbedding and
// WriteKvCache: q_out and both caches, over head dims, GQA ratios, positions
// far into the context, and negative slots that must leave the cache alone.
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

// (dtype, tokens, q heads, kv heads, head_dim)
class AttentionInputTest
    : public CudaKernelsTest,
      public ::testing::WithParamInterface<std::tuple<DType, int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(AttentionInputTest, MatchesTheCpuComposition) {
  const auto [dt, t, hq, hk, d] = GetParam();
  const int64_t blocks = 8, bs = 16;
  const Tensor qkv = Random({t, (hq + 2 * hk) * d}, dt, 1, -2.0f, 2.0f);
  const Tensor qn = Random({d}, dt, 2, 0.5f, 1.5f), kn = Random({d}, dt, 3, 0.5f, 1.5f);
  std::vector<int32_t> pos(t), slots(t);
  for (int64_t i = 0; i < t; ++i) {
    pos[i] = static_cast<int32_t>(i * 397 % 5000);  // angles far from zero
    slots[i] = i % 5 == 3 ? -1 : static_cast<int32_t>((i * 37) % (blocks * bs));
  }
  // Distinct slots only (a repeated slot's winner is unspecified).
  std::vector<bool> used(blocks * bs, false);
  for (int32_t& s : slots) {
    if (s >= 0 && used[s]) s = -1;
    if (s >= 0) used[s] = true;
  }
  const Tensor positions = Tensor::FromInts(pos, {t}), slot = Tensor::FromInts(slots, {t});
  const Tensor kc = Random({blocks, bs, hk, d}, dt, 4), vc = Random({blocks, bs, hk, d}, dt, 5);
  const Tensor gkc = OnGpu(kc), gvc = OnGpu(vc);
  const Tensor q = PoisonedHost({t, hq, d}, dt);
  ASSERT_TRUE(QkvNormRopeCache(qkv, qn, kn, 1e-6f, positions, 1e6f, slot, kc, vc, q).ok());
  const Tensor gq = PoisonedGpu({t, hq, d}, dt);
  const absl::Status s = QkvNormRopeCache(OnGpu(qkv), OnGpu(qn), OnGpu(kn), 1e-6f, OnGpu(positions), 1e6f,
                                          OnGpu(slot), gkc, gvc, gq);
  ASSERT_TRUE(s.ok()) << s;
  // Both sides round the normalised value to the dtype and then the rotated
  // one, each from fp32 computed in a different order (and CUDA's sincosf vs
  // glibc's). A one-ulp difference in a normalised input (|x| < 4 here)
  // survives the rotation as an absolute error of about one ulp of the
  // input even where x1·c − x2·s cancels, so the floor is absolute: 2 ulps
  // of 1 in the storage dtype; f32 as the separate ops.
  const Tolerance tol = dt == DType::kBF16 ? Tolerance{1.0f / 128, 2.0f / 128}
                        : dt == DType::kF16 ? Tolerance{1.0f / 1024, 2.0f / 1024}
                                            : ToleranceFor(dt);
  ExpectClose(gq, q, tol, "q_out");
  ExpectClose(gkc, kc, tol, "k_cache");
  ExpectClose(gvc, vc, kExact, "v_cache");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionInputTest,
                         ::testing::Values(std::make_tuple(DType::kF32, 1, 16, 8, 128),
                                           std::make_tuple(DType::kBF16, 1, 16, 8, 128),
                                           std::make_tuple(DType::kBF16, 37, 16, 8, 128),
                                           std::make_tuple(DType::kF32, 37, 4, 4, 64),
                                           std::make_tuple(DType::kBF16, 130, 8, 1, 64),
                                           std::make_tuple(DType::kF16, 9, 6, 2, 36),
                                           std::make_tuple(DType::kBF16, 5, 2, 1, 256),
                                           // Many tokens of Qwen3's heads (3 blocks of 16 heads a token),
                                           // head counts that leave a block part empty, f32 rows of two
                                           // vector loads a lane, and 32 features (one a lane).
                                           std::make_tuple(DType::kBF16, 700, 32, 8, 128),
                                           std::make_tuple(DType::kF32, 33, 4, 2, 256),
                                           std::make_tuple(DType::kF16, 17, 5, 3, 64),
                                           std::make_tuple(DType::kBF16, 21, 3, 1, 32)));

}  // namespace
}  // namespace seam::kernels::cuda_test

// PagedAttention against a double-precision causal GQA loop over the logical
// keys and values (Hq = 6, Hk = 2, block_size 16, shuffled block tables), for
// prefill, decode, chunked prefill and empty sequences in one batch.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HalfUlp;
using testing::PagedFixture;
using testing::SeqSpec;

struct AttentionCase {
  DType dtype;
  int head_dim;
};

void PrintTo(const AttentionCase& c, std::ostream* os) {
  *os << DTypeName(c.dtype) << " head_dim " << c.head_dim;
}

class PagedAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(PagedAttentionTest, MixedBatchMatchesCausalGqaReference) {
  const AttentionCase c = GetParam();
  // Full prefill over 3 blocks, one decode token at 41 positions, a chunk of
  // 9 rows after 30 cached tokens, a sequence with no rows this step, and a
  // prefill shorter than one block.
  PagedFixture f({{37, 37}, {41, 1}, {39, 9}, {20, 0}, {5, 5}}, 6, 2, c.head_dim, 16, c.dtype, 61);
  for (int b = 0; b < 5; ++b) f.WriteTokens(b, 0, f.seqs[b].context);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const Tensor out = Tensor::Empty(f.q.shape(), c.dtype);
  ASSERT_TRUE(PagedAttention(f.q, f.k_cache, f.v_cache, f.Batch(), scale, out).ok());
  // Scores are fp32 dot products of head_dim terms, the softmax and the value
  // sum run in fp32 over up to 41 positions: 1e-5 relative to the output's
  // scale; a bf16 output adds half a bf16 ulp.
  ExpectAllClose(out, f.Reference(scale), 1e-5 + HalfUlp(c.dtype), "out");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(AttentionCase{DType::kF32, 64}, AttentionCase{DType::kBF16, 64},
                                           AttentionCase{DType::kF32, 80}, AttentionCase{DType::kBF16, 80}),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_d" +
                                  std::to_string(info.param.head_dim);
                         });

// Attention of one sequence whose cache holds `context` tokens, for its last
// `q_rows` tokens, whose queries are rows [q_from, q_from + q_rows) of f.q.
Tensor AttendOneSequence(const PagedFixture& f, int context, int q_from, int q_rows) {
  std::vector<int32_t> table(f.max_blocks, -1);
  std::copy(f.tables[0].begin(), f.tables[0].end(), table.begin());
  const AttentionBatch batch{Tensor::FromInts({0, q_rows}, {2}), Tensor::FromInts({context}, {1}),
                             Tensor::FromInts(table, {1, f.max_blocks})};
  const Tensor q = f.q.Rows(q_from, q_rows).Clone();
  Tensor out = Tensor::Empty(q.shape(), f.dtype);
  SEAM_CHECK_OK(PagedAttention(q, f.k_cache, f.v_cache, batch, 0.125f, out));
  return out;
}

TEST(PagedAttention, PrefillAndDecodeAgreeOnTheSamePositions) {
  // One prefill over 40 tokens, against a prefill of 13, a chunk of 10, then
  // 17 decode steps, each writing its token to the cache first. Each query
  // row sees the same positions and sums them in the same order, so the
  // outputs are bitwise equal.
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    PagedFixture f({{40, 40}}, 6, 2, 64, 16, dtype, 62);
    f.WriteTokens(0, 0, 40);
    const std::vector<float> full = AttendOneSequence(f, 40, 0, 40).ToFloats();

    PagedFixture g({{40, 40}}, 6, 2, 64, 16, dtype, 62);
    std::vector<float> stepped;
    auto run = [&](int from, int to) {
      g.WriteTokens(0, from, to);
      const std::vector<float> part = AttendOneSequence(g, to, from, to - from).ToFloats();
      stepped.insert(stepped.end(), part.begin(), part.end());
    };
    run(0, 13);
    run(13, 23);
    for (int p = 23; p < 40; ++p) run(p, p + 1);
    EXPECT_EQ(stepped, full) << DTypeName(dtype);
  }
}

TEST(PagedAttention, ZeroRowsAndZeroSequencesAreAccepted) {
  PagedFixture f({{20, 0}}, 6, 2, 64, 16, DType::kBF16, 63);
  const Tensor out = Tensor::Empty({0, 6, 64}, DType::kBF16);
  EXPECT_TRUE(PagedAttention(f.q, f.k_cache, f.v_cache, f.Batch(), 0.125f, out).ok());
  const AttentionBatch none{Tensor::FromInts({0}, {1}), Tensor::FromInts({}, {0}), Tensor::FromInts({}, {0, 1})};
  EXPECT_TRUE(PagedAttention(f.q, f.k_cache, f.v_cache, none, 0.125f, out).ok());
}

}  // namespace
}  // namespace seam::kernels

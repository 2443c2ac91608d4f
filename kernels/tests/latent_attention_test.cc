// WriteLatentCache and PagedLatentAttention on the CPU against a naive
// double-precision loop over the logical (unpaged) latent rows: ragged
// batches mixing prefill, decode, chunked prefill and empty sequences,
// contexts at every page boundary, shuffled block tables, f32 and bf16, and
// LongCat-Flash's Dc 512 / Dr 64 beside small shapes.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/kernels/latent_attention.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HalfUlp;
using testing::RandomTensor;
using testing::SeqSpec;
using testing::Values;

// A batch over a latent cache whose rows were written through
// WriteLatentCache from each sequence's logical rows [context, Dc + Dr].
struct LatentFixture {
  LatentFixture(std::vector<SeqSpec> seqs_in, int hq_in, int dc_in, int dr_in, int block_size_in, DType dtype_in,
                uint64_t seed)
      : seqs(std::move(seqs_in)), hq(hq_in), dc(dc_in), width(dc_in + dr_in), block_size(block_size_in),
        dtype(dtype_in) {
    int total_blocks = 0, total_q = 0;
    for (const SeqSpec& s : seqs) {
      const int used = (s.context + block_size - 1) / block_size;
      total_blocks += used;
      max_blocks = std::max(max_blocks, used + 1);  // a spare column of -1, never read
      total_q += s.q_len;
    }
    const int num_blocks = total_blocks + 3;  // some blocks belong to no sequence
    std::vector<int32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
    cache = RandomTensor({num_blocks, block_size, width}, dtype, seed + 1);  // stale rows everywhere
    size_t next = 0;
    for (size_t b = 0; b < seqs.size(); ++b) {
      const int used = (seqs[b].context + block_size - 1) / block_size;
      tables.emplace_back(ids.begin() + next, ids.begin() + next + used);
      next += used;
      latents.push_back(RandomTensor({seqs[b].context, width}, dtype, seed + 10 * b + 2));
      std::vector<int32_t> slots(seqs[b].context);
      for (int p = 0; p < seqs[b].context; ++p) slots[p] = tables[b][p / block_size] * block_size + p % block_size;
      SEAM_CHECK_OK(WriteLatentCache(latents[b], Tensor::FromInts(slots, {seqs[b].context}), cache));
    }
    q = RandomTensor({total_q, hq, width}, dtype, seed + 3);
  }

  AttentionBatch Batch() const {
    std::vector<int32_t> qs{0}, ctx, table;
    for (size_t b = 0; b < seqs.size(); ++b) {
      qs.push_back(qs.back() + seqs[b].q_len);
      ctx.push_back(seqs[b].context);
      std::vector<int32_t> row(max_blocks, -1);
      std::copy(tables[b].begin(), tables[b].end(), row.begin());
      table.insert(table.end(), row.begin(), row.end());
    }
    const int64_t n = static_cast<int64_t>(seqs.size());
    return AttentionBatch{Tensor::FromInts(qs, {n + 1}), Tensor::FromInts(ctx, {n}),
                          Tensor::FromInts(table, {n, max_blocks})};
  }

  // out[T, Hq, Dc] in double: for each query row and head, softmax over the
  // visible logical rows of scale·q·row, times the rows' first Dc entries.
  std::vector<double> Reference(float scale) const {
    const std::vector<double> qv = Values(q);
    std::vector<double> want;
    int64_t q_row = 0;
    for (size_t b = 0; b < seqs.size(); ++b) {
      const std::vector<double> rows = Values(latents[b]);
      for (int i = 0; i < seqs[b].q_len; ++i, ++q_row) {
        const int visible = seqs[b].context - seqs[b].q_len + i + 1;
        for (int h = 0; h < hq; ++h) {
          const double* qh = qv.data() + (q_row * hq + h) * width;
          std::vector<double> s(visible);
          double max_s = -INFINITY, sum = 0.0;
          for (int p = 0; p < visible; ++p) {
            double dot = 0.0;
            for (int j = 0; j < width; ++j) dot += qh[j] * rows[p * width + j];
            s[p] = scale * dot;
            max_s = std::max(max_s, s[p]);
          }
          for (double& e : s) sum += (e = std::exp(e - max_s));
          for (int j = 0; j < dc; ++j) {
            double acc = 0.0;
            for (int p = 0; p < visible; ++p) acc += s[p] * rows[p * width + j];
            want.push_back(acc / sum);
          }
        }
      }
    }
    return want;
  }

  std::vector<SeqSpec> seqs;
  int hq, dc, width, block_size;
  DType dtype;
  int max_blocks = 0;
  std::vector<std::vector<int32_t>> tables;
  std::vector<Tensor> latents;  // per sequence: [context, Dc + Dr]
  Tensor cache, q;
};

struct LatentCase {
  DType dtype;
  int hq, dc, dr;
};

void PrintTo(const LatentCase& c, std::ostream* os) {
  *os << DTypeName(c.dtype) << " hq " << c.hq << " dc " << c.dc << " dr " << c.dr;
}

class PagedLatentAttentionTest : public ::testing::TestWithParam<LatentCase> {
 protected:
  void ExpectMatchesReference(const std::vector<SeqSpec>& seqs, uint64_t seed) {
    const LatentCase c = GetParam();
    LatentFixture f(seqs, c.hq, c.dc, c.dr, 16, c.dtype, seed);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dc / 4 + c.dr));
    const Tensor out = Tensor::Empty({f.q.dim(0), c.hq, c.dc}, c.dtype);
    const absl::Status status = PagedLatentAttention(f.q, f.cache, f.Batch(), scale, out);
    ASSERT_TRUE(status.ok()) << status;
    // Scores are fp32 sums of Dc + Dr products (|q|, |row| <= 1, at most 576
    // terms), the softmax and the output sum run in fp32 over up to 300
    // positions: errors of at most 1.3e-6 of the output's scale were seen
    // (Dc 512 / Dr 64); 2e-5 leaves a fifteenfold margin. A bf16 output adds
    // half a bf16 ulp.
    ExpectAllClose(out, f.Reference(scale), 2e-5 + HalfUlp(c.dtype), "out");
  }
};

TEST_P(PagedLatentAttentionTest, MixedBatchMatchesNaiveLoop) {
  // Full prefill over 3 blocks, one decode row at 41 positions, a chunk of 9
  // rows after 30 cached tokens, a sequence with no rows this step, and a
  // prefill shorter than one block.
  ExpectMatchesReference({{37, 37}, {41, 1}, {39, 9}, {20, 0}, {5, 5}}, 71);
}

TEST_P(PagedLatentAttentionTest, DecodeAtEveryPageBoundaryMatchesNaiveLoop) {
  ExpectMatchesReference({{1, 1}, {15, 1}, {16, 1}, {17, 1}, {31, 1}, {32, 1}, {33, 1}, {300, 1}}, 72);
}

TEST_P(PagedLatentAttentionTest, ChunksEndingAtEveryPageBoundaryMatchNaiveLoop) {
  ExpectMatchesReference({{16, 3}, {17, 2}, {32, 16}, {33, 17}, {48, 1}}, 73);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedLatentAttentionTest,
                         ::testing::Values(LatentCase{DType::kF32, 3, 16, 8}, LatentCase{DType::kBF16, 3, 16, 8},
                                           LatentCase{DType::kF32, 1, 32, 0}, LatentCase{DType::kBF16, 2, 24, 0},
                                           LatentCase{DType::kF32, 4, 512, 64},
                                           LatentCase{DType::kBF16, 4, 512, 64}),
                         [](const ::testing::TestParamInfo<LatentCase>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_hq" + std::to_string(info.param.hq) +
                                  "_dc" + std::to_string(info.param.dc) + "_dr" + std::to_string(info.param.dr);
                         });

TEST(WriteLatentCache, WritesRowsAtTheirSlotsAndSkipsNegativeSlots) {
  Tensor cache = Tensor::FromFloats(std::vector<float>(2 * 2 * 3, 9.0f), {2, 2, 3}, DType::kF32);
  const Tensor latent = Tensor::FromFloats({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, DType::kF32);
  ASSERT_TRUE(WriteLatentCache(latent, Tensor::FromInts({3, -1, 0}, {3}), cache).ok());
  EXPECT_EQ(cache.ToFloats(), (std::vector<float>{7, 8, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3}));
}

TEST(WriteLatentCache, RefusesASlotPastTheCache) {
  Tensor cache = Tensor::Empty({2, 2, 3}, DType::kBF16);
  const Tensor latent = Tensor::Empty({1, 3}, DType::kBF16);
  const absl::Status status = WriteLatentCache(latent, Tensor::FromInts({4}, {1}), cache);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "slot_mapping[0] = 4 is past the latent cache's 4 slots");
}

TEST(PagedLatentAttention, RefusesShapesAndDtypesByName) {
  LatentFixture f({{5, 5}}, 2, 8, 4, 16, DType::kF32, 74);
  const AttentionBatch batch = f.Batch();
  auto code_and_message = [&](const Tensor& q, const Tensor& out) {
    return PagedLatentAttention(q, f.cache, batch, 0.5f, out);
  };
  absl::Status s = code_and_message(f.q, Tensor::Empty({5, 2, 8}, DType::kBF16));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "out: expected q's dtype f32, got bf16");
  s = code_and_message(f.q, Tensor::Empty({5, 2, 13}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "out: Dc = 13 must lie in [1, 12] (the latent cache's row width)");
  s = code_and_message(Tensor::Empty({5, 2, 11}, DType::kF32), Tensor::Empty({5, 2, 8}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q:"), std::string::npos) << s;
  s = code_and_message(f.q, Tensor::Empty({5, 3, 8}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("out:"), std::string::npos) << s;
}

TEST(PagedLatentAttention, RefusesABlockOutsideTheCache) {
  LatentFixture f({{5, 5}}, 2, 8, 4, 16, DType::kF32, 75);
  AttentionBatch batch = f.Batch();
  batch.block_tables = Tensor::FromInts({99, -1}, {1, 2});
  const absl::Status s =
      PagedLatentAttention(f.q, f.cache, batch, 0.5f, Tensor::Empty({5, 2, 8}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("block_tables[0, 0] = 99"), std::string::npos) << s;
}

}  // namespace
}  // namespace seam::kernels

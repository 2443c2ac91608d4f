// CUDA KV-cache writes and paged attention against the CPU reference: the same
// caches, block tables and queries run on host tensors and on CUDA copies, with
// poisoned outputs so unwritten elements show (cases and tolerances:
// paged_attention_case.h).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "paged_attention_case.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda_test {
namespace {

// (dtype, query heads per kv head, head_dim); two kv heads throughout.
class PagedAttentionTest : public CudaKernelsTest,
                           public ::testing::WithParamInterface<std::tuple<DType, int64_t, int64_t>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  int64_t hk() const { return 2; }
  int64_t hq() const { return hk() * std::get<1>(GetParam()); }
  int64_t d() const { return std::get<2>(GetParam()); }
  Tolerance tol() const { return AttentionTolerance(dtype()); }
  PagedCase Case(const std::vector<Seq>& seqs, uint32_t seed, float q_range = 1.0f) const {
    return MakeCase(seqs, hq(), hk(), d(), dtype(), seed, q_range);
  }
};

TEST_P(PagedAttentionTest, PrefillOfMixedLengthsMatchesCpu) {
  // 130 rows span three query tiles; 1 and 17 share a tile boundary with others.
  ExpectAttentionMatchesCpu(Case({{1, 1}, {17, 17}, {130, 130}}, 10), tol(), "prefill 1/17/130");
}

TEST_P(PagedAttentionTest, PrefillWithPeakedScoresMatchesCpu) {
  // Large queries make the softmax peaked, so the max subtraction matters.
  ExpectAttentionMatchesCpu(Case({{65, 65}, {3, 3}}, 20, 8.0f), tol(), "prefill, peaked");
}

TEST_P(PagedAttentionTest, DecodeBatchOfDifferentContextsMatchesCpu) {
  // Context 1, exactly one block, one past a block, several blocks.
  ExpectAttentionMatchesCpu(Case(Decode({1, 5, 16, 17, 40, 100, 129}), 30), tol(), "decode batch");
}

TEST_P(PagedAttentionTest, LongDecodeContextsMatchCpu) {
  // Many 128-token tiles per sequence, the last one partial.
  ExpectAttentionMatchesCpu(Case(Decode({3000, 1234, 2049}), 40, 4.0f), tol(), "long decode");
}

TEST_P(PagedAttentionTest, ChunkedPrefillMatchesCpu) {
  // Chunks after a cached prefix, a decode row and a fresh prefill in one batch.
  ExpectAttentionMatchesCpu(Case({{5, 40}, {1, 33}, {70, 200}, {64, 64}, {2, 1000}}, 50), tol(), "chunked prefill");
}

TEST_P(PagedAttentionTest, SingleLongPrefillChunkMatchesCpu) {
  ExpectAttentionMatchesCpu(Case({{300, 700}}, 60), tol(), "one chunk of 300 after 400 cached");
}

std::string AttentionName(const ::testing::TestParamInfo<std::tuple<DType, int64_t, int64_t>>& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_group" + std::to_string(std::get<1>(info.param)) +
         "_d" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Grid, PagedAttentionTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(int64_t{1}, int64_t{2}, int64_t{8}),
                                            ::testing::Values(int64_t{64}, int64_t{128})),
                         AttentionName);

TEST_F(CudaKernelsTest, LargeDecodeBatchWithoutContextSplitMatchesCpu) {
  // 70 sequences x 2 kv heads fill more blocks than an H200 has SMs, so the
  // decode kernel runs unsplit with 4 warps per block (small batches of long
  // contexts above run as clusters).
  std::vector<int32_t> contexts;
  for (int32_t i = 0; i < 70; ++i) contexts.push_back(1 + (i * 37) % 300);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    ExpectAttentionMatchesCpu(MakeCase(Decode(contexts), 2, 2, 128, dtype, 65), AttentionTolerance(dtype),
                              std::string("decode of 70, ") + DTypeName(dtype));
  }
}

TEST_F(CudaKernelsTest, DecodeAroundTheContextSplitThresholdMatchesCpu) {
  // Contexts around a table of 32 blocks (496: 32 blocks, 497: 33), a long
  // one, a mixed batch, and a batch of 40 sequences of group 2 x 4 kv heads
  // that fills more blocks than SMs (4 warps).
  std::vector<int32_t> many;
  for (int32_t i = 0; i < 40; ++i) many.push_back(1 + (i * 53) % 700);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t d : {64, 128}) {
      const std::string tag = std::string(DTypeName(dtype)) + " d" + std::to_string(d);
      int seed = 120;
      for (const std::vector<int32_t>& contexts :
           {std::vector<int32_t>{496}, std::vector<int32_t>{497}, std::vector<int32_t>{2000},
            std::vector<int32_t>{497, 9, 496, 1}, many}) {
        ExpectAttentionMatchesCpu(MakeCase(Decode(contexts), 8, 4, d, dtype, ++seed, 4.0f),
                                  AttentionTolerance(dtype),
                                  "decode of " + std::to_string(contexts.size()) + " up to " +
                                      std::to_string(*std::max_element(contexts.begin(), contexts.end())) + ", " +
                                      tag);
      }
    }
  }
}

TEST_F(CudaKernelsTest, DecodeSplitChoicesMatchCpu) {
  // Batches of 1, 8 and 64 sequences of one context each: the decode launcher
  // picks the cluster size and warps per block from B, the kv heads and the
  // table width, so short contexts of small batches split into clusters of
  // mostly idle warps and large batches do not split. Tables with one spare
  // column and three times wider than the context needs (unused columns -1).
  int seed = 400;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t d : {64, 128}) {
      for (int32_t b : {1, 8, 64}) {
        for (int32_t ctx : {1, 15, 16, 17, 192, 2048, 3000}) {
          if (b == 64 && ctx > 192) continue;  // keeps the CPU reference quick
          for (int64_t table_scale : {1, 3}) {
            std::vector<int32_t> contexts(static_cast<size_t>(b), ctx);
            if (b > 1) contexts[1] = std::max(1, ctx / 3);  // one shorter context in the batch
            PagedCase c = MakeCase(Decode(contexts), 4, 2, d, dtype, static_cast<uint32_t>(++seed), 4.0f,
                                   table_scale);
            ExpectAttentionMatchesCpu(c, AttentionTolerance(dtype),
                                      "decode B" + std::to_string(b) + " ctx " + std::to_string(ctx) + " table x" +
                                          std::to_string(table_scale) + ", " + DTypeName(dtype) + " d" +
                                          std::to_string(d));
          }
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, TensorCorePrefillAtTileBoundariesMatchesCpu) {
  // bf16/f16 with head_dim 64 and 128 run the mma.sync prefill: query tiles of
  // 64 rows and key tiles of 64 keys, double-buffered. Lengths just under, at
  // and over those sizes, chunks whose first position is not tile-aligned,
  // a decode row among them, and long sequences of odd and even numbers of
  // key tiles; GQA 2 and 1, with peaked scores.
  const std::vector<Seq> mixed{{1, 1}, {63, 63}, {64, 64}, {65, 65}, {127, 127}, {200, 200}};
  const std::vector<Seq> chunked{{50, 300}, {64, 129}, {1, 70}, {129, 129}, {17, 80}};
  const std::vector<Seq> longer{{520, 520}, {300, 700}};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (const auto& [hq, hk, d] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 64}, {4, 2, 128}, {2, 2, 128},
                                    {16, 8, 128}}) {
      const std::string tag = std::string(DTypeName(dtype)) + " hq" + std::to_string(hq) + " hk" +
                              std::to_string(hk) + " d" + std::to_string(d);
      ExpectAttentionMatchesCpu(MakeCase(mixed, hq, hk, d, dtype, 140), AttentionTolerance(dtype), "mixed, " + tag);
      ExpectAttentionMatchesCpu(MakeCase(chunked, hq, hk, d, dtype, 141, 4.0f), AttentionTolerance(dtype),
                                "chunked, peaked, " + tag);
      ExpectAttentionMatchesCpu(MakeCase(longer, hq, hk, d, dtype, 142), AttentionTolerance(dtype), "long, " + tag);
    }
  }
}

TEST_F(CudaKernelsTest, PagedAttentionServesGroupsWiderThanOneDecodeBlock) {
  // 12 query heads per kv head: decode blocks of 8 and 4 heads.
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    ExpectAttentionMatchesCpu(MakeCase(Decode({1, 77, 300}), 24, 2, 64, dtype, 70), AttentionTolerance(dtype),
                              std::string("decode, group 12, ") + DTypeName(dtype));
    ExpectAttentionMatchesCpu(MakeCase({{40, 40}, {3, 9}}, 24, 2, 64, dtype, 71), AttentionTolerance(dtype),
                              std::string("prefill, group 12, ") + DTypeName(dtype));
  }
}

TEST_F(CudaKernelsTest, PagedAttentionHandlesOddAndLargeHeadDims) {
  // 36: no 16-byte vectors for bf16 (scalar path); 72: vectors but not a power
  // of two of them; 256: the largest head_dim.
  for (int64_t d : {36, 72, 256}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const std::string tag = "d" + std::to_string(d) + " " + DTypeName(dtype);
      ExpectAttentionMatchesCpu(MakeCase(Decode({1, 50, 500}), 4, 2, d, dtype, 80), AttentionTolerance(dtype),
                                "decode " + tag);
      ExpectAttentionMatchesCpu(MakeCase({{33, 33}, {20, 90}}, 4, 2, d, dtype, 81), AttentionTolerance(dtype),
                                "prefill " + tag);
    }
  }
}

TEST_F(CudaKernelsTest, PagedAttentionMatchesCpuInF16) {
  ExpectAttentionMatchesCpu(MakeCase(Decode({7, 600}), 16, 8, 128, DType::kF16, 90), AttentionTolerance(DType::kF16),
                            "decode f16");
  ExpectAttentionMatchesCpu(MakeCase({{100, 100}, {9, 30}}, 16, 8, 128, DType::kF16, 91),
                            AttentionTolerance(DType::kF16), "prefill f16");
}

TEST_F(CudaKernelsTest, PagedAttentionRejectsMixedDtypes) {
  const PagedCase c = MakeCase(Decode({4}), 2, 1, 64, DType::kF32, 95);
  const AttentionBatch gbatch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)};
  const Tensor k_bf16 = OnGpu(Random(c.k_cache.shape(), DType::kBF16, 96));
  const absl::Status status = PagedAttention(OnGpu(c.q), k_bf16, OnGpu(c.v_cache), gbatch, c.scale,
                                             PoisonedGpu(c.q.shape(), DType::kF32));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
}

// Decode and prefill captured in a CUDA graph: the launchers neither sync nor
// allocate, and the replayed graph gives the CPU's result.
TEST_F(CudaKernelsTest, PagedAttentionIsCapturableInACudaGraph) {
  for (const std::vector<Seq>& seqs : {Decode({1, 300, 2500}), std::vector<Seq>{{20, 20}, {70, 150}}}) {
    const PagedCase c = MakeCase(seqs, 16, 8, 128, DType::kBF16, 100);
    const Tensor out = PoisonedHost(c.q.shape(), c.q.dtype());
    ASSERT_TRUE(PagedAttention(c.q, c.k_cache, c.v_cache, {c.query_start, c.context_lens, c.block_tables}, c.scale,
                               out)
                    .ok());
    const AttentionBatch gbatch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)};
    const Tensor gq = OnGpu(c.q), gk = OnGpu(c.k_cache), gv = OnGpu(c.v_cache);
    const Tensor gout = PoisonedGpu(c.q.shape(), c.q.dtype());
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph = nullptr;
    {
      ScopedStream scoped(stream);
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      const absl::Status status = PagedAttention(gq, gk, gv, gbatch, c.scale, gout);
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      ASSERT_TRUE(status.ok()) << status;
    }
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ExpectClose(gout, out, AttentionTolerance(DType::kBF16), "graph replay");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// ---- WriteKvCache -------------------------------------------------------------------

// Writes k/v rows through slot_mapping on both devices; negative slots leave
// the cache as it was. The conversions round to nearest even on both sides.
void ExpectCacheWriteMatchesCpu(DType kv_dtype, DType cache_dtype, int64_t hk, int64_t d) {
  const std::string what = std::string(DTypeName(kv_dtype)) + " into " + DTypeName(cache_dtype) + " d" +
                           std::to_string(d);
  const int64_t num_blocks = 4, rows = 7;
  const Tensor k = Random({rows, hk, d}, kv_dtype, 1);
  const Tensor v = Random({rows, hk, d}, kv_dtype, 2);
  const Tensor slots = Tensor::FromInts({5, -1, 16, 63, -7, 0, 33}, {rows});
  const Tensor k_cache = Random({num_blocks, kBlockSize, hk, d}, cache_dtype, 3);
  const Tensor v_cache = Random({num_blocks, kBlockSize, hk, d}, cache_dtype, 4);
  const Tensor gk_cache = OnGpu(k_cache), gv_cache = OnGpu(v_cache);
  ASSERT_TRUE(WriteKvCache(k, v, slots, k_cache, v_cache).ok()) << what;
  const absl::Status status = WriteKvCache(OnGpu(k), OnGpu(v), OnGpu(slots), gk_cache, gv_cache);
  ASSERT_TRUE(status.ok()) << what << ": " << status;
  ExpectClose(gk_cache, k_cache, kExact, "k_cache, " + what);
  ExpectClose(gv_cache, v_cache, kExact, "v_cache, " + what);
}

TEST_F(CudaKernelsTest, WriteKvCacheMatchesCpuAndSkipsNegativeSlots) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    ExpectCacheWriteMatchesCpu(dtype, dtype, 2, 128);
    ExpectCacheWriteMatchesCpu(dtype, dtype, 3, 36);  // rows of odd vector counts
  }
}

TEST_F(CudaKernelsTest, WriteKvCacheConvertsToTheCacheDtype) {
  ExpectCacheWriteMatchesCpu(DType::kF32, DType::kBF16, 2, 64);
  ExpectCacheWriteMatchesCpu(DType::kBF16, DType::kF32, 2, 64);
}

TEST_F(CudaKernelsTest, WriteKvCacheSkipsSlotsPastTheCacheWithoutHostChecks) {
  // The CPU rejects such a slot; the CUDA launcher cannot see slot values
  // without a sync, so it must leave the cache untouched for that row.
  const int64_t hk = 2, d = 64, num_blocks = 2;
  const Tensor k = Random({3, hk, d}, DType::kBF16, 5);
  const Tensor v = Random({3, hk, d}, DType::kBF16, 6);
  const Tensor k_cache = Random({num_blocks, kBlockSize, hk, d}, DType::kBF16, 7);
  const Tensor v_cache = Random({num_blocks, kBlockSize, hk, d}, DType::kBF16, 8);
  const Tensor gk_cache = OnGpu(k_cache), gv_cache = OnGpu(v_cache);
  ASSERT_TRUE(WriteKvCache(k, v, Tensor::FromInts({3, -1, 31}, {3}), k_cache, v_cache).ok());
  ASSERT_TRUE(WriteKvCache(OnGpu(k), OnGpu(v), OnGpu(Tensor::FromInts({3, 32, 31}, {3})), gk_cache, gv_cache).ok());
  ExpectClose(gk_cache, k_cache, kExact, "k_cache");
  ExpectClose(gv_cache, v_cache, kExact, "v_cache");
}

// The cache written on the GPU feeds the GPU attention: one decode step.
TEST_F(CudaKernelsTest, WriteThenDecodeMatchesCpu) {
  PagedCase c = MakeCase(Decode({17, 40}), 4, 2, 128, DType::kBF16, 110);
  // New k/v of each sequence's last position (context - 1).
  const Tensor k = Random({2, 2, 128}, DType::kBF16, 111);
  const Tensor v = Random({2, 2, 128}, DType::kBF16, 112);
  const int32_t* tables = c.block_tables.data<int32_t>();
  const int64_t max_blocks = c.block_tables.dim(1);
  std::vector<int32_t> slots;
  for (int64_t b = 0; b < 2; ++b) {
    const int32_t pos = (b == 0 ? 17 : 40) - 1;
    slots.push_back(tables[b * max_blocks + pos / kBlockSize] * static_cast<int32_t>(kBlockSize) +
                    pos % static_cast<int32_t>(kBlockSize));
  }
  const Tensor slot_mapping = Tensor::FromInts(slots, {2});
  const Tensor gk_cache = OnGpu(c.k_cache), gv_cache = OnGpu(c.v_cache);
  ASSERT_TRUE(WriteKvCache(k, v, slot_mapping, c.k_cache, c.v_cache).ok());
  ASSERT_TRUE(WriteKvCache(OnGpu(k), OnGpu(v), OnGpu(slot_mapping), gk_cache, gv_cache).ok());
  const Tensor out = PoisonedHost(c.q.shape(), c.q.dtype());
  ASSERT_TRUE(
      PagedAttention(c.q, c.k_cache, c.v_cache, {c.query_start, c.context_lens, c.block_tables}, c.scale, out).ok());
  const Tensor gout = PoisonedGpu(c.q.shape(), c.q.dtype());
  const AttentionBatch gbatch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)};
  ASSERT_TRUE(PagedAttention(OnGpu(c.q), gk_cache, gv_cache, gbatch, c.scale, gout).ok());
  ExpectClose(gout, out, AttentionTolerance(DType::kBF16), "decode after write");
}

}  // namespace
}  // namespace seam::kernels::cuda_test

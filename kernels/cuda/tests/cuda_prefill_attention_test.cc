// The tensor-core prefill kernel (bf16/f16, head_dim 64 and 128) against the
// CPU reference over the shapes it must serve: GQA groups 1 to 8, odd ones
// included, ragged batches, chunks after a cached prefix whose last block
// is partly filled, query tiles shorter than 64 rows, and few query tiles
// over long contexts (key splits merged through the split workspace, fewer
// tiles than SMs); and the split path giving the same bytes on every launch.
// Tolerances (AttentionTolerance, paged_attention_case.h): one storage ulp
// of the output, and the rounding of each probability to bf16 / f16 before
// P V, which moves an output by at most 2^-8 (2^-11) absolute with |v| <= 1;
// splits add no rounding (the partials stay fp32).
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "paged_attention_case.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

struct Heads {
  int64_t hq, hk;
};

std::string Tag(DType dtype, Heads h, int64_t d) {
  return std::string(DTypeName(dtype)) + " group " + std::to_string(h.hq / h.hk) + " hq" + std::to_string(h.hq) +
         " hk" + std::to_string(h.hk) + " d" + std::to_string(d);
}

TEST_F(CudaKernelsTest, TensorCorePrefillMatchesCpuForEveryGroup) {
  // Groups 1, 2, 3, 4, 5 and 8. Fresh prompts of 37, 64 and 3 rows, chunks
  // of 50 rows after 250 cached (the last block holds 12 of 16 rows) and of
  // 17 after 68 (5 of 16), and 130 rows after 870 (three tiles, the last of
  // 2 rows).
  const std::vector<Seq> seqs{{37, 37}, {64, 64}, {50, 300}, {17, 85}, {130, 1000}, {3, 3}};
  const Heads heads[] = {{2, 2}, {4, 2}, {6, 2}, {8, 2}, {5, 1}, {16, 2}};
  uint32_t seed = 1500;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int64_t d : {64, 128}) {
      for (Heads h : heads) {
        ExpectAttentionMatchesCpu(MakeCase(seqs, h.hq, h.hk, d, dtype, ++seed, 4.0f), AttentionTolerance(dtype),
                                  "ragged prefill, " + Tag(dtype, h, d));
      }
    }
  }
}

TEST_F(CudaKernelsTest, TensorCorePrefillSplitsLongContextsForEveryGroup) {
  // One tile of 64 rows over a 32k context (the most splits; head_dim 128
  // only, to keep the CPU reference quick), and a batch of 4 tiles over
  // contexts of 3k to 6k (fewer tiles x head groups than SMs): the keys
  // split over blocks and the last split to arrive merges them.
  const Heads heads[] = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {8, 1}};
  uint32_t seed = 1600;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int64_t d : {64, 128}) {
      for (Heads h : heads) {
        if (d == 128) {
          ExpectAttentionMatchesCpu(MakeCase({{64, 32768}}, h.hq, h.hk, d, dtype, ++seed, 4.0f),
                                    AttentionTolerance(dtype), "64 rows over 32k, " + Tag(dtype, h, d));
        }
        ExpectAttentionMatchesCpu(MakeCase({{100, 4000}, {5, 3003}, {64, 6000}}, h.hq, h.hk, d, dtype, ++seed, 4.0f),
                                  AttentionTolerance(dtype), "few tiles over long contexts, " + Tag(dtype, h, d));
      }
    }
  }
}

// The bytes of a CUDA tensor, after the kernels finish.
std::vector<unsigned char> BytesOf(const Tensor& gpu) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> bytes(static_cast<size_t>(gpu.nbytes()));
  EXPECT_EQ(cudaMemcpy(bytes.data(), gpu.raw_data(), bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return bytes;
}

TEST_F(CudaKernelsTest, SplitPrefillGivesTheSameBytesOnEveryLaunch) {
  // The merge sums the partials in split order whichever split arrives last,
  // so repeated launches (over a poisoned output) agree bit for bit; the
  // first also matches the CPU.
  uint32_t seed = 1700;
  for (Heads h : {Heads{8, 2}, Heads{4, 2}, Heads{6, 2}}) {  // groups 4, 2 and 3
    for (int64_t d : {64, 128}) {
      const PagedCase c = MakeCase({{64, 32768}, {40, 3000}}, h.hq, h.hk, d, DType::kBF16, ++seed, 4.0f);
      const AttentionBatch gbatch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)};
      const Tensor gq = OnGpu(c.q), gk = OnGpu(c.k_cache), gv = OnGpu(c.v_cache);
      const Tensor gout = PoisonedGpu(c.q.shape(), c.q.dtype());
      const std::string tag = Tag(DType::kBF16, h, d);
      ASSERT_TRUE(PagedAttention(gq, gk, gv, gbatch, c.scale, gout).ok()) << tag;
      const Tensor want = PoisonedHost(c.q.shape(), c.q.dtype());
      ASSERT_TRUE(
          PagedAttention(c.q, c.k_cache, c.v_cache, {c.query_start, c.context_lens, c.block_tables}, c.scale, want)
              .ok());
      ExpectClose(gout, want, AttentionTolerance(DType::kBF16), "first launch, " + tag);
      const std::vector<unsigned char> first = BytesOf(gout);
      for (int run = 0; run < 3; ++run) {
        ASSERT_EQ(cudaMemset(gout.raw_data(), 0xFF, gout.nbytes()), cudaSuccess);
        ASSERT_TRUE(PagedAttention(gq, gk, gv, gbatch, c.scale, gout).ok()) << tag;
        EXPECT_TRUE(BytesOf(gout) == first) << "launch " << run + 2 << " differs, " << tag;
      }
    }
  }
}

}  // namespace
}  // namespace seam::kernels::cuda_test

// Decode attention over the paged cache against the CPU reference, over the
// shapes the tensor-core decode kernel (bf16/f16, head_dim 64/128/256) must
// serve: GQA groups 1/4/8 and MQA (groups of 8 and of 32 query heads, the
// latter wider than one mma tile), contexts at every page boundary, ragged
// batches, long contexts (32k+), context splits from none to the most the
// launcher picks (block tables wider than the contexts, as a decode graph
// has them), split partials merged inside graph replays and on two streams
// at once, and mixed steps whose decode rows and short chunks take the decode
// kernel while longer chunks take the prefill kernels. f32 runs the same
// cases through the CUDA-core kernels. Tolerances: paged_attention_case.h.
#include <cuda_runtime_api.h>

#include <string>
#include <tuple>
#include <vector>

#include "paged_attention_case.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda_test {
namespace {

const DType kDtypes[] = {DType::kBF16, DType::kF16, DType::kF32};

struct Heads {
  int64_t hq, hk;
};
// MHA, GQA 4, GQA 8, MQA of 8 heads, MQA of 32 heads (two mma tiles of heads).
const Heads kHeads[] = {{4, 4}, {8, 2}, {16, 2}, {8, 1}, {32, 1}};

std::string Tag(DType dtype, Heads h, int64_t d) {
  return std::string(DTypeName(dtype)) + " hq" + std::to_string(h.hq) + " hk" + std::to_string(h.hk) + " d" +
         std::to_string(d);
}

TEST_F(CudaKernelsTest, DecodeMatchesCpuAtPageBoundariesForEveryGroupAndHeadDim) {
  // Contexts of one key, at block_size - 1, block_size, block_size + 1 (and
  // twice), a warp chunk past several, in one ragged batch.
  const std::vector<int32_t> contexts{1, 15, 16, 17, 31, 32, 33, 100, 257};
  uint32_t seed = 500;
  for (DType dtype : kDtypes) {
    for (Heads h : kHeads) {
      for (int64_t d : {64, 128, 256}) {
        ExpectAttentionMatchesCpu(MakeCase(Decode(contexts), h.hq, h.hk, d, dtype, ++seed, 4.0f),
                                  AttentionTolerance(dtype), "page boundaries, " + Tag(dtype, h, d));
      }
    }
  }
}

TEST_F(CudaKernelsTest, LongDecodeContextsOf32kMatchCpu) {
  uint32_t seed = 600;
  for (DType dtype : kDtypes) {
    ExpectAttentionMatchesCpu(MakeCase(Decode({32769}), 8, 2, 128, dtype, ++seed, 4.0f), AttentionTolerance(dtype),
                              std::string("one context of 32769, ") + DTypeName(dtype));
    ExpectAttentionMatchesCpu(MakeCase(Decode({32768, 5, 17000, 4096}), 8, 2, 128, dtype, ++seed),
                              AttentionTolerance(dtype), std::string("ragged long contexts, ") + DTypeName(dtype));
  }
  for (int64_t d : {64, 256}) {
    ExpectAttentionMatchesCpu(MakeCase(Decode({32769, 40000}), 8, 1, d, DType::kBF16, ++seed, 4.0f),
                              AttentionTolerance(DType::kBF16), "long MQA, d" + std::to_string(d));
  }
}

TEST_F(CudaKernelsTest, DecodeSplitsMatchCpuFromOneSequenceToMany) {
  // 1 .. 300 sequences of group 4 over 2 kv heads: from many splits of one
  // context to none (more (sequence, kv head) blocks than SM slots), with
  // tables as wide as the contexts and 4x wider (the splits then divide the
  // actual context, not the table).
  uint32_t seed = 700;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int32_t batch : {1, 3, 20, 100, 300}) {
      std::vector<int32_t> contexts;
      const int32_t longest = batch >= 100 ? 300 : 3000;
      for (int32_t i = 0; i < batch; ++i) contexts.push_back(1 + (i * 97 + 1000) % longest);
      for (int64_t table_scale : {1, 4}) {
        ExpectAttentionMatchesCpu(MakeCase(Decode(contexts), 8, 2, 128, dtype, ++seed, 4.0f, table_scale),
                                  AttentionTolerance(dtype),
                                  "B" + std::to_string(batch) + " table x" + std::to_string(table_scale) + ", " +
                                      DTypeName(dtype));
      }
    }
  }
}

TEST_F(CudaKernelsTest, DecodeMatchesCpuForOtherCacheBlockSizes) {
  uint32_t seed = 800;
  for (int64_t block_size : {1, 8, 32, 64, 256}) {
    for (DType dtype : {DType::kBF16, DType::kF32}) {
      ExpectAttentionMatchesCpu(
          MakeCase(Decode({1, block_size - 1 > 0 ? static_cast<int32_t>(block_size - 1) : 2,
                           static_cast<int32_t>(block_size + 1), 1500}),
                   8, 2, 128, dtype, ++seed, 4.0f, 1, block_size),
          AttentionTolerance(dtype), "block size " + std::to_string(block_size) + ", " + DTypeName(dtype));
    }
  }
}

TEST_F(CudaKernelsTest, MixedStepsMatchCpuForEveryGroup) {
  // Decode rows, chunks short enough to share an mma tile with their heads
  // (q_len * group <= 16), one row longer than that, chunks after long
  // prefixes, a fresh prefill and an idle sequence, in one batch.
  uint32_t seed = 900;
  for (DType dtype : kDtypes) {
    for (Heads h : kHeads) {
      const int32_t short_rows = static_cast<int32_t>(16 / std::min<int64_t>(h.hq / h.hk, 16));
      const std::vector<Seq> seqs{{1, 40},   {short_rows, 300}, {short_rows + 1, 301}, {2, 2},   {1, 1},
                                  {0, 0},    {70, 2000},        {64, 64},              {1, 513}, {16, 1100}};
      for (int64_t d : {64, 128, 256}) {
        ExpectAttentionMatchesCpu(MakeCase(seqs, h.hq, h.hk, d, dtype, ++seed, 4.0f), AttentionTolerance(dtype),
                                  "mixed step, " + Tag(dtype, h, d));
      }
    }
  }
}

TEST_F(CudaKernelsTest, PrefillChunksOverLongCachedPrefixesMatchCpu) {
  // Few query tiles over many key tiles: the prefill kernels split the keys
  // of each tile over blocks and merge the partials (with and without decode
  // rows beside them).
  uint32_t seed = 950;
  for (DType dtype : kDtypes) {
    for (Heads h : {Heads{4, 4}, Heads{8, 2}}) {
      for (int64_t d : {64, 128}) {
        ExpectAttentionMatchesCpu(MakeCase({{64, 20000}}, h.hq, h.hk, d, dtype, ++seed, 4.0f),
                                  AttentionTolerance(dtype), "64 rows after 19936, " + Tag(dtype, h, d));
        ExpectAttentionMatchesCpu(MakeCase({{5, 9000}, {1, 3000}, {100, 12000}, {1, 40}}, h.hq, h.hk, d, dtype,
                                           ++seed, 4.0f),
                                  AttentionTolerance(dtype), "chunks after long prefixes, " + Tag(dtype, h, d));
      }
    }
  }
}

TEST_F(CudaKernelsTest, OneRowPerSequenceOnAverageWithIdleSequencesMatchesCpu) {
  // As many rows as sequences, but idle sequences leave rows to a chunk: the
  // launcher sees T == B and must still cover the chunk's rows.
  uint32_t seed = 1000;
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (Heads h : {Heads{4, 4}, Heads{32, 2}}) {
      std::vector<Seq> seqs(18, Seq{0, 7});
      seqs[3] = {18, 500};
      ExpectAttentionMatchesCpu(MakeCase(seqs, h.hq, h.hk, 128, dtype, ++seed), AttentionTolerance(dtype),
                                "idle sequences, " + Tag(dtype, h, 128));
    }
  }
}

// The case's batch and tensors on the GPU, run on `stream`.
struct GpuCase {
  Tensor q, k, v, out;
  AttentionBatch batch;
  float scale;
  explicit GpuCase(const PagedCase& c)
      : q(OnGpu(c.q)), k(OnGpu(c.k_cache)), v(OnGpu(c.v_cache)), out(PoisonedGpu(c.q.shape(), c.q.dtype())),
        batch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)}, scale(c.scale) {}
  absl::Status Run() const { return PagedAttention(q, k, v, batch, scale, out); }
};

Tensor CpuResult(const PagedCase& c) {
  Tensor out = PoisonedHost(c.q.shape(), c.q.dtype());
  EXPECT_TRUE(PagedAttention(c.q, c.k_cache, c.v_cache, {c.query_start, c.context_lens, c.block_tables}, c.scale, out)
                  .ok());
  return out;
}

TEST_F(CudaKernelsTest, SplitDecodeReplaysFromAGraphAgainAndAgain) {
  // One long context and a short one: the long one splits, its partials
  // merged by the last split to finish, whose counter must be back at zero
  // for the next replay. The stream has run the kernel once before the
  // capture (its split workspace exists).
  const PagedCase c = MakeCase(Decode({9000, 33}), 8, 2, 128, DType::kBF16, 1100, 4.0f, 2);
  const Tensor want = CpuResult(c);
  const GpuCase g(c);
  ExpectEagerAndGraphReplaysMatch([&] { return g.Run(); }, g.out, want, AttentionTolerance(DType::kBF16));
}

TEST_F(CudaKernelsTest, SplitDecodeOnTwoStreamsAtOnceKeepsItsPartialsApart) {
  const PagedCase a = MakeCase(Decode({12000}), 8, 2, 128, DType::kBF16, 1200, 4.0f);
  const PagedCase b = MakeCase(Decode({7000, 20}), 8, 2, 128, DType::kBF16, 1201, 4.0f);
  const GpuCase ga(a), gb(b);
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t& s : streams) ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  for (int round = 0; round < 3; ++round) {  // the first round allocates the workspaces
    {
      ScopedStream on(streams[0]);
      ASSERT_TRUE(ga.Run().ok());
    }
    {
      ScopedStream on(streams[1]);
      ASSERT_TRUE(gb.Run().ok());
    }
  }
  ExpectClose(ga.out, CpuResult(a), AttentionTolerance(DType::kBF16), "stream 0");
  ExpectClose(gb.out, CpuResult(b), AttentionTolerance(DType::kBF16), "stream 1");
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
}

TEST_F(CudaKernelsTest, MixedStepIsCapturableInACudaGraph) {
  // Decode rows and a prefill chunk: two launches, captured together.
  const PagedCase c = MakeCase({{1, 3000}, {40, 900}, {1, 17}, {3, 60}}, 16, 4, 128, DType::kBF16, 1300, 4.0f);
  const Tensor want = CpuResult(c);
  const GpuCase g(c);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ScopedStream scoped(stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const absl::Status status = g.Run();  // first use of the stream: no workspace, no split
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(status.ok()) << status;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ExpectClose(g.out, want, AttentionTolerance(DType::kBF16), "mixed step replay");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace seam::kernels::cuda_test

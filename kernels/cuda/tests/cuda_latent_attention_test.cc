// WriteLatentCache and PagedLatentAttention on CUDA against the CPU
// reference: LongCat-Flash's and DeepSeek's Dc 512 / Dr 64 with 1, 16, 64
// and 128 heads (bf16 takes the tensor-core kernel, one to four m tiles,
// packs of several query rows for few heads), contexts at every page
// boundary and up to 128k (context splits merged by the merge kernel, also
// inside graph replays; one sequence alone splits over the whole GPU, and a
// table far wider than the context splits on the device by the actual
// context; every split count from 2 to 132 for one, two and four m tiles,
// batches whose merge keeps whole rows per warp or cuts them, and the same
// bits on every run, eager or replayed), ragged batches mixing decode, chunked prefill, prefill and idle
// sequences, block sizes 16 and 64, and small shapes and f32 through the
// CUDA-core kernel.
//
// Tolerances. f32 (CUDA-core kernel): both sides compute in fp32 but sum in
// different orders (sgemm on the CPU, sequential per warp with an online
// softmax on the GPU); a score is a sum of 576 products of at most |8| x 1
// scaled by 1/sqrt(192), so its error is a few 1e-6 absolute, moving each
// weight by that relative and the output (a convex combination of rows with
// |v| <= 1) by as much: 1e-4 relative with a 1e-4 floor keeps a margin of
// ten. bf16: as for PagedAttention (paged_attention_case.h) the tensor-core
// kernel rounds each probability to bf16 for P V (2^-9 relative per weight,
// at most 2^-8 absolute on the output) and each side rounds its output once
// (one bf16 ulp apart at most): 2^-7 relative with a 2^-7 floor. Query
// values reach 8 so softmaxes are peaked and outputs stay large against the
// floor even over 32k positions. Splitting a context adds only fp32
// reassociation (each split's partial sums and their merge with weights
// 2^(m_i - M)), a few 1e-7 relative, far inside the bf16 tolerance; so the
// split and unsplit paths share it.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "paged_attention_case.h"
#include "seam/kernels/latent_attention.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda_test {
namespace {

struct LatentCase {
  Tensor q, cache, query_start, context_lens, block_tables;
  int64_t dc = 0;
  float scale = 0.0f;
};

// Sequences in a paged latent cache of shuffled blocks (spare table columns
// -1, some blocks nobody owns), q values in [-q_range, q_range].
// table_scale > 1 widens the block table as MakeCase does (a serving
// table sized for contexts far longer than this batch's).
LatentCase MakeLatent(const std::vector<Seq>& seqs, int64_t hq, int64_t dc, int64_t dr, DType dtype, uint32_t seed,
                      float q_range = 8.0f, int64_t block_size = kBlockSize, int64_t table_scale = 1) {
  const PagedCase shape = MakeCase(seqs, 1, 1, 8, DType::kF32, seed, 1.0f, table_scale, block_size);
  LatentCase c;
  const int64_t rows = shape.q.dim(0), blocks = shape.k_cache.dim(0);
  c.q = Random({rows, hq, dc + dr}, dtype, seed + 11, -q_range, q_range);
  c.cache = Random({blocks, block_size, dc + dr}, dtype, seed + 12);
  c.query_start = shape.query_start;
  c.context_lens = shape.context_lens;
  c.block_tables = shape.block_tables;
  c.dc = dc;
  c.scale = 1.0f / std::sqrt(static_cast<float>(dc / 4 + dr));  // LongCat: (128 + 64)^-1/2
  return c;
}

Tolerance LatentTolerance(DType dtype) {
  return dtype == DType::kF32 ? Tolerance{1e-4f, 1e-4f} : AttentionTolerance(dtype);
}

Tensor CpuLatent(const LatentCase& c) {
  const Tensor out = PoisonedHost({c.q.dim(0), c.q.dim(1), c.dc}, c.q.dtype());
  const absl::Status s =
      PagedLatentAttention(c.q, c.cache, {c.query_start, c.context_lens, c.block_tables}, c.scale, out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

struct GpuLatent {
  Tensor q, cache, out;
  AttentionBatch batch;
  float scale;
  explicit GpuLatent(const LatentCase& c)
      : q(OnGpu(c.q)), cache(OnGpu(c.cache)), out(PoisonedGpu({c.q.dim(0), c.q.dim(1), c.dc}, c.q.dtype())),
        batch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)}, scale(c.scale) {}
  absl::Status Run() const { return PagedLatentAttention(q, cache, batch, scale, out); }
};

void ExpectLatentMatchesCpu(const LatentCase& c, const std::string& what) {
  const Tensor want = CpuLatent(c);
  const GpuLatent g(c);
  const absl::Status status = g.Run();
  ASSERT_TRUE(status.ok()) << what << ": " << status;
  ExpectClose(g.out, want, LatentTolerance(c.q.dtype()), what);
}

// The case eagerly and replayed from a CUDA graph, against the CPU.
void ExpectLatentReplaysMatchCpu(const LatentCase& c, const std::string& what) {
  SCOPED_TRACE(what);
  const Tensor want = CpuLatent(c);
  const GpuLatent g(c);
  ExpectEagerAndGraphReplaysMatch([&] { return g.Run(); }, g.out, want, LatentTolerance(c.q.dtype()));
}

std::string Tag(DType dtype, int64_t hq, int64_t dc, int64_t dr) {
  return std::string(DTypeName(dtype)) + " hq" + std::to_string(hq) + " dc" + std::to_string(dc) + " dr" +
         std::to_string(dr);
}

const int64_t kHeads[] = {1, 16, 64, 128};

TEST_F(CudaKernelsTest, LatentCacheWriteMatchesCpuAndSkipsPadding) {
  for (DType from : {DType::kF32, DType::kBF16}) {
    for (DType to : {DType::kF32, DType::kBF16}) {
      const Tensor latent = Random({5, 576}, from, 1300);
      const Tensor slots = Tensor::FromInts({7, -1, 0, 33, 12}, {5});
      const Tensor cache = Random({3, 16, 576}, to, 1301);
      const Tensor gcache = OnGpu(cache);
      ASSERT_TRUE(WriteLatentCache(latent, slots, cache).ok());
      ASSERT_TRUE(WriteLatentCache(OnGpu(latent), OnGpu(slots), gcache).ok());
      ExpectClose(gcache, cache, kExact, std::string("write ") + DTypeName(from) + " -> " + DTypeName(to));
    }
  }
}

TEST_F(CudaKernelsTest, LatentDecodeMatchesCpuAtEveryPageBoundary) {
  const std::vector<int32_t> contexts{1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 127, 128, 129, 257};
  uint32_t seed = 1400;
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t hq : kHeads) {
      ExpectLatentMatchesCpu(MakeLatent(Decode(contexts), hq, 512, 64, dtype, ++seed),
                             "page boundaries, " + Tag(dtype, hq, 512, 64));
    }
  }
  for (int64_t hq : {16, 64}) {
    ExpectLatentMatchesCpu(MakeLatent(Decode(contexts), hq, 512, 64, DType::kBF16, ++seed, 8.0f, 64),
                           "page boundaries, block size 64, " + Tag(DType::kBF16, hq, 512, 64));
  }
}

TEST_F(CudaKernelsTest, LatentDecodeOfLongContextsMatchesCpu) {
  uint32_t seed = 1500;
  for (int64_t hq : kHeads) {
    ExpectLatentMatchesCpu(MakeLatent(Decode({8192}), hq, 512, 64, DType::kBF16, ++seed),
                           "one context of 8192, " + Tag(DType::kBF16, hq, 512, 64));
    ExpectLatentMatchesCpu(MakeLatent(Decode({32769, 5, 17000, 4096}), hq, 512, 64, DType::kBF16, ++seed),
                           "ragged long contexts, " + Tag(DType::kBF16, hq, 512, 64));
  }
  std::vector<int32_t> batch;
  for (int i = 0; i < 40; ++i) batch.push_back(1 + (i * 977) % 8192);
  ExpectLatentMatchesCpu(MakeLatent(Decode(batch), 64, 512, 64, DType::kBF16, ++seed),
                         "batch of 40 contexts up to 8k, " + Tag(DType::kBF16, 64, 512, 64));
  ExpectLatentMatchesCpu(MakeLatent(Decode({8192, 3000}), 16, 512, 64, DType::kF32, ++seed),
                         "long contexts, " + Tag(DType::kF32, 16, 512, 64));
}

TEST_F(CudaKernelsTest, LatentMixedBatchesMatchCpu) {
  // Prefill over several blocks, decode rows, chunks after cached tokens, an
  // idle sequence, a prefill shorter than a block, a long chunk whose rows
  // span several packs, and a decode row at 8k.
  const std::vector<Seq> seqs{{37, 37}, {1, 41}, {9, 39}, {0, 20}, {5, 5}, {100, 300}, {1, 8192}, {70, 70}};
  uint32_t seed = 1600;
  for (int64_t hq : kHeads) {
    ExpectLatentMatchesCpu(MakeLatent(seqs, hq, 512, 64, DType::kBF16, ++seed),
                           "mixed, " + Tag(DType::kBF16, hq, 512, 64));
  }
  ExpectLatentMatchesCpu(MakeLatent(seqs, 16, 512, 64, DType::kF32, ++seed), "mixed, " + Tag(DType::kF32, 16, 512, 64));
  // T == B with an idle sequence: one sequence carries two rows in a "decode" step.
  ExpectLatentMatchesCpu(MakeLatent({{2, 50}, {0, 9}, {1, 17}}, 64, 512, 64, DType::kBF16, ++seed),
                         "two rows beside an idle sequence, " + Tag(DType::kBF16, 64, 512, 64));
  for (int64_t hq : {1, 16}) {
    ExpectLatentMatchesCpu(MakeLatent({{2, 50}, {0, 9}, {1, 17}}, hq, 512, 64, DType::kBF16, ++seed),
                           "two rows beside an idle sequence, " + Tag(DType::kBF16, hq, 512, 64));
  }
}

TEST_F(CudaKernelsTest, LatentPrefillOfAThousandRowsMatchesCpu) {
  uint32_t seed = 1700;
  for (int64_t hq : {16, 64}) {
    ExpectLatentMatchesCpu(MakeLatent({{1024, 1024}, {300, 2500}}, hq, 512, 64, DType::kBF16, ++seed),
                           "prefill and a chunk, " + Tag(DType::kBF16, hq, 512, 64));
  }
}

TEST_F(CudaKernelsTest, LatentSmallShapesAndMixedDtypesMatchCpu) {
  const std::vector<Seq> seqs{{37, 37}, {1, 41}, {9, 39}, {0, 20}, {5, 5}, {1, 17}};
  uint32_t seed = 1800;
  struct Shape3 {
    int64_t hq, dc, dr;
  };
  for (Shape3 s : {Shape3{3, 16, 8}, Shape3{2, 32, 0}, Shape3{8, 128, 64}, Shape3{5, 512, 64}}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      ExpectLatentMatchesCpu(MakeLatent(seqs, s.hq, s.dc, s.dr, dtype, ++seed),
                             "small, " + Tag(dtype, s.hq, s.dc, s.dr));
    }
  }
  // A bf16 cache read by f32 queries takes the CUDA-core kernel.
  LatentCase c = MakeLatent(seqs, 4, 512, 64, DType::kF32, ++seed);
  c.cache = Random(c.cache.shape(), DType::kBF16, ++seed);
  ExpectLatentMatchesCpu(c, "f32 q over a bf16 cache");
}

TEST_F(CudaKernelsTest, LatentSplitDecodeReplaysFromAGraph) {
  const LatentCase c = MakeLatent(Decode({20000, 33}), 64, 512, 64, DType::kBF16, 1900);
  const Tensor want = CpuLatent(c);
  const GpuLatent g(c);
  ExpectEagerAndGraphReplaysMatch([&] { return g.Run(); }, g.out, want, LatentTolerance(DType::kBF16));
}

// One sequence alone: the grid splits its context over every SM (one to
// four m tiles, two head chunks at 128 heads), merged by the merge kernel.
TEST_F(CudaKernelsTest, LatentBatchOfOneMatchesCpuEagerAndReplayed) {
  uint32_t seed = 2000;
  for (int64_t hq : {16, 32, 64, 128}) {
    for (int32_t ctx : {1, 15, 16, 17, 1000, 4096, 32768}) {
      ExpectLatentReplaysMatchCpu(MakeLatent(Decode({ctx}), hq, 512, 64, DType::kBF16, ++seed),
                                  "batch 1, context " + std::to_string(ctx) + ", " + Tag(DType::kBF16, hq, 512, 64));
    }
  }
  ExpectLatentReplaysMatchCpu(MakeLatent(Decode({131072}), 64, 512, 64, DType::kBF16, ++seed),
                              "batch 1, context 131072, " + Tag(DType::kBF16, 64, 512, 64));
}

// Batch 1 at every page and chunk boundary, with a table just wide enough
// and with one 64 times wider (splits sized for the table, shares taken on
// the device from the actual context: most splits idle).
TEST_F(CudaKernelsTest, LatentBatchOfOneMatchesCpuAtEveryPageBoundary) {
  uint32_t seed = 2100;
  for (int32_t ctx : {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 257}) {
    for (int64_t table_scale : {1, 64}) {
      ExpectLatentMatchesCpu(MakeLatent(Decode({ctx}), 64, 512, 64, DType::kBF16, ++seed, 8.0f, kBlockSize,
                                        table_scale),
                             "batch 1, context " + std::to_string(ctx) + ", table x" + std::to_string(table_scale));
    }
  }
  ExpectLatentReplaysMatchCpu(MakeLatent(Decode({1000}), 64, 512, 64, DType::kBF16, ++seed, 8.0f, kBlockSize, 128),
                              "batch 1, context 1000 in a table for 128k");
}

// Very different contexts in one batch: each pack splits its own context
// into equal shares of the same grid; short ones do not split at all.
TEST_F(CudaKernelsTest, LatentRaggedBatchesMatchCpuEagerAndReplayed) {
  uint32_t seed = 2200;
  for (int64_t hq : {16, 32, 64}) {
    ExpectLatentReplaysMatchCpu(
        MakeLatent(Decode({32768, 1, 1000, 17, 4096, 16, 65536, 2}), hq, 512, 64, DType::kBF16, ++seed),
        "ragged to 64k, " + Tag(DType::kBF16, hq, 512, 64));
  }
  ExpectLatentReplaysMatchCpu(MakeLatent(Decode({5, 3000, 1, 129}), 64, 512, 64, DType::kBF16, ++seed, 8.0f,
                                         kBlockSize, 16),
                              "ragged in a wide table, " + Tag(DType::kBF16, 64, 512, 64));
}

// The merge at every split count a pack can have: at batch 1 a context of
// 64 a - r positions (r < 32) has 2 a chunks in a table of 2 a + 1, so the
// grid takes a + 1 splits (up to the GPU's 132 blocks) and the pack a active
// ones of 2 chunks each: counts across the lanes' 32-split rounds of
// weights and the merge's 4-, 8- and 16-split rounds of copies, for one,
// two and four m tiles (a warp's row cut into 4 column parts).
TEST_F(CudaKernelsTest, LatentSplitMergeMatchesCpuAtEverySplitCount) {
  uint32_t seed = 2300;
  for (int64_t hq : {16, 32, 64}) {
    for (int32_t a : {2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 131, 132}) {
      const int32_t ctx = 64 * a - a % 3;
      ExpectLatentMatchesCpu(MakeLatent(Decode({ctx}), hq, 512, 64, DType::kBF16, ++seed),
                             "batch 1, " + std::to_string(a) + " active splits, " + Tag(DType::kBF16, hq, 512, 64));
    }
  }
}

// Batches whose merge keeps whole rows per warp or cuts them in two (more
// than 8 row warps per SM: 1056 on an H200), each with sequences too short
// to split (left alone by the merge) among long ones.
TEST_F(CudaKernelsTest, LatentSplitMergeOfLargerBatchesMatchesCpu) {
  uint32_t seed = 2400;
  struct Batch {
    int64_t hq, seqs;
  };
  for (Batch b : {Batch{64, 12}, Batch{64, 32}, Batch{32, 20}, Batch{32, 40}, Batch{16, 40}, Batch{16, 80}}) {
    std::vector<int32_t> contexts;
    for (int64_t i = 0; i < b.seqs; ++i) {
      contexts.push_back(static_cast<int32_t>(i % 4 == 0 ? 1 + i % 60 : 200 + (i * 977) % 4000));
    }
    ExpectLatentMatchesCpu(MakeLatent(Decode(contexts), b.hq, 512, 64, DType::kBF16, ++seed),
                           "batch " + std::to_string(b.seqs) + ", " + Tag(DType::kBF16, b.hq, 512, 64));
  }
}

std::vector<uint8_t> HostBytes(const Tensor& gpu) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  absl::StatusOr<Tensor> host = gpu.To(Device::CPU());
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return {};
  const auto* p = static_cast<const uint8_t*>(host->raw_data());
  return std::vector<uint8_t>(p, p + host->nbytes());
}

// The merge's sums run in an order fixed by the shapes: two eager calls and
// a graph replay give the same bits (a split of 128 active splits, and a
// ragged batch where some packs split and some do not).
TEST_F(CudaKernelsTest, LatentSplitMergeGivesTheSameBitsOnEveryRun) {
  uint32_t seed = 2500;
  for (const LatentCase& c : {MakeLatent(Decode({8192}), 64, 512, 64, DType::kBF16, ++seed),
                              MakeLatent(Decode({32768, 1, 1000, 17, 4096}), 16, 512, 64, DType::kBF16, ++seed)}) {
    const GpuLatent g(c);
    std::vector<std::vector<uint8_t>> runs;
    for (int run = 0; run < 2; ++run) {
      ASSERT_EQ(cudaMemset(g.out.raw_data(), 0xFF, g.out.nbytes()), cudaSuccess);
      ASSERT_TRUE(g.Run().ok());
      runs.push_back(HostBytes(g.out));
    }
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    {
      ScopedStream scoped(stream);
      ASSERT_TRUE(g.Run().ok());  // the stream's workspace is allocated outside the capture
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      const absl::Status status = g.Run();
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      ASSERT_TRUE(status.ok()) << status;
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(g.out.raw_data(), 0xFF, g.out.nbytes(), stream), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      runs.push_back(HostBytes(g.out));
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    cudaStreamDestroy(stream);
    ASSERT_EQ(runs[0].size(), g.out.nbytes());
    EXPECT_TRUE(runs[1] == runs[0]) << "a second eager call changed the bits";
    EXPECT_TRUE(runs[2] == runs[0]) << "a graph replay changed the bits";
    ExpectClose(g.out, CpuLatent(c), LatentTolerance(DType::kBF16), "same bits, against the CPU");
  }
}

}  // namespace
}  // namespace seam::kernels::cuda_test

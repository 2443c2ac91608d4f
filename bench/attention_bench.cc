// seam-bench-gpu attention: PagedAttention alone at a model's attention
// shapes (default: 32 query heads, 8 kv heads of 128, bf16, blocks of 16),
// replayed from a CUDA graph, each time against the floor of its KV bytes
// (every sequence's K and V read once) at the device copy bandwidth measured
// in the same run.
//   decode  --batches x --contexts, one query row per sequence; with
//           --table-context N the block tables are N positions wide (as a
//           decode graph captured for contexts up to N), else as wide as
//           the context
//   mixed   with --prefill-rows R > 0: each batch's decode rows plus one
//           sequence bringing a chunk of R rows at context --prefill-context,
//           timed together and apart (decode rows alone, the chunk alone)
// The caches hold random values; each sequence's blocks come from a shuffled
// pool, as a cache's free list hands them out after some churn.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "gpu_bench_util.h"
#include "seam/core/cuda_graph.h"

namespace seam::bench {
namespace {

struct AttnShape {
  int64_t hq, hk, d, block_size;
  DType dtype;
};

struct Caches {
  Tensor k, v;
};

// Caches of `blocks` blocks, filled by copying one random slab over them
// (the values only need to be varied and finite).
Caches MakeCaches(const AttnShape& s, int64_t blocks) {
  const Shape shape{blocks, s.block_size, s.hk, s.d};
  Caches c{Tensor::Empty(shape, s.dtype, kGpu), Tensor::Empty(shape, s.dtype, kGpu)};
  const int64_t slab_elems = std::min<int64_t>(NumElements(shape), int64_t{8} << 20);
  for (Tensor* t : {&c.k, &c.v}) {
    const Tensor slab = RandomGpu({slab_elems}, s.dtype, t == &c.k ? 21 : 22);
    const size_t slab_bytes = slab.nbytes();
    auto* dst = static_cast<char*>(t->raw_data());
    for (size_t at = 0; at < t->nbytes(); at += slab_bytes) {
      const size_t n = std::min(slab_bytes, t->nbytes() - at);
      Check(SEAM_CUDA_STATUS(cudaMemcpy(dst + at, slab.raw_data(), n, cudaMemcpyDeviceToDevice)), "fill cache");
    }
  }
  return c;
}

struct Seq {
  int32_t q_len;
  int32_t ctx;
};

// The batch's tensors on the GPU: q, out and the paged batch description.
struct Batch {
  Tensor q, out;
  kernels::AttentionBatch attention;
  double kv_bytes = 0;
};

Batch MakeBatch(const AttnShape& s, const std::vector<Seq>& seqs, int64_t table_positions, int64_t cache_blocks,
                uint32_t seed) {
  int64_t rows = 0, width = (table_positions + s.block_size - 1) / s.block_size;
  std::vector<int32_t> starts{0}, lens;
  for (const Seq& q : seqs) {
    rows += q.q_len;
    starts.push_back(static_cast<int32_t>(rows));
    lens.push_back(q.ctx);
    width = std::max<int64_t>(width, (q.ctx + s.block_size - 1) / s.block_size);
  }
  std::vector<int32_t> pool(static_cast<size_t>(cache_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  const int64_t b = static_cast<int64_t>(seqs.size());
  std::vector<int32_t> tables(static_cast<size_t>(b * width), -1);
  size_t next = 0;
  Batch out;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t used = (seqs[i].ctx + s.block_size - 1) / s.block_size;
    if (next + used > pool.size()) {
      std::cerr << "attention: the cache has too few blocks for this batch\n";
      std::exit(2);
    }
    for (int64_t j = 0; j < used; ++j) tables[i * width + j] = pool[next++];
    out.kv_bytes += 2.0 * seqs[i].ctx * s.hk * s.d * DTypeSize(s.dtype);
  }
  auto up = [](const std::vector<int32_t>& v, const Shape& shape) {
    return Value(Tensor::FromInts(v, shape).To(kGpu), "upload");
  };
  out.q = RandomGpu({rows, s.hq, s.d}, s.dtype, seed + 1);
  out.out = Tensor::Empty({rows, s.hq, s.d}, s.dtype, kGpu);
  out.attention = {up(starts, {b + 1}), up(lens, {b}), up(tables, {b, width})};
  return out;
}

// Microseconds per PagedAttention call, replayed from a graph of 20 calls.
double AttentionUs(const AttnShape& s, const Caches& c, const Batch& b, const CudaStream& stream) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  auto call = [&] { return kernels::PagedAttention(b.q, c.k, c.v, b.attention, scale, b.out); };
  {
    kernels::ScopedStream on(stream.handle());
    Check(call(), "attention");  // outside the capture: the stream's split workspace
    Check(stream.Synchronize(), "sync");
  }
  kernels::ScopedStream on(stream.handle());
  CudaGraph graph = Value(CudaGraph::Capture(stream, [&]() -> absl::Status {
                            for (int i = 0; i < 20; ++i) SEAM_RETURN_IF_ERROR(call());
                            return absl::OkStatus();
                          }),
                          "capture");
  return TimeUs([&] { Check(graph.Launch(stream), "launch"); }, 10, 3) / 20;
}

std::vector<Seq> DecodeRows(int64_t batch, int32_t ctx) { return std::vector<Seq>(static_cast<size_t>(batch), {1, ctx}); }

}  // namespace

int AttentionBench(const Flags& flags) {
  const AttnShape s{flags.Int("heads", 32), flags.Int("kv-heads", 8), flags.Int("head-dim", 128),
                    flags.Int("block-size", 16), ParseDType(flags.Get("dtype", "bf16"))};
  const std::vector<int64_t> batches = flags.Ints("batches", "1,8,32,64,128,256");
  const std::vector<int64_t> contexts = flags.Ints("contexts", "1024");
  const int64_t table_context = flags.Int("table-context", 0);
  const int64_t prefill_rows = flags.Int("prefill-rows", 0), prefill_ctx = flags.Int("prefill-context", 4096);
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  // One cache for every case: the largest batch's KV with room to spare.
  int64_t blocks = 0;
  for (int64_t b : batches) {
    for (int64_t ctx : contexts) blocks = std::max(blocks, b * ((ctx + s.block_size - 1) / s.block_size + 1));
  }
  blocks += (prefill_ctx + s.block_size - 1) / s.block_size + 16;
  const Caches caches = MakeCaches(s, blocks);
  const CudaStream stream = Value(CudaStream::Create(kGpu), "stream");
  json rows = json::array();
  uint32_t seed = 100;
  std::printf("%-8s %6s %8s %10s %10s %8s\n", "case", "batch", "context", "us", "floor_us", "x_floor");
  auto report = [&](const char* what, int64_t b, int64_t ctx, const Batch& batch, json extra) {
    const double us = AttentionUs(s, caches, batch, stream), floor_us = batch.kv_bytes / copy_gbps / 1e3;
    std::printf("%-8s %6ld %8ld %10.2f %10.2f %8.2f\n", what, static_cast<long>(b), static_cast<long>(ctx), us,
                floor_us, us / floor_us);
    extra.update({{"case", what}, {"batch", b}, {"context", ctx}, {"us", us}, {"kv_bytes", batch.kv_bytes},
                  {"floor_us", floor_us}, {"floor_ratio", us / floor_us}});
    rows.push_back(extra);
    return us;
  };
  for (int64_t ctx : contexts) {
    for (int64_t b : batches) {
      const int64_t width = std::max(table_context, ctx);
      const Batch batch = MakeBatch(s, DecodeRows(b, static_cast<int32_t>(ctx)), width, blocks, ++seed);
      const double decode_us = report("decode", b, ctx, batch, {{"table_context", width}});
      if (prefill_rows <= 0) continue;
      std::vector<Seq> mixed = DecodeRows(b, static_cast<int32_t>(ctx));
      const Seq chunk{static_cast<int32_t>(prefill_rows), static_cast<int32_t>(prefill_ctx)};
      mixed.push_back(chunk);
      const json chunk_info = {{"prefill_rows", prefill_rows}, {"prefill_context", prefill_ctx}};
      const double both = report("mixed", b, ctx, MakeBatch(s, mixed, width, blocks, ++seed), chunk_info);
      const size_t mixed_row = rows.size() - 1;
      const double alone = report("chunk", 1, prefill_ctx, MakeBatch(s, {chunk}, prefill_ctx, blocks, ++seed), chunk_info);
      rows[mixed_row]["mixed_over_apart"] = both / (decode_us + alone);
    }
  }
  WriteJson(flags, {{"copy_gbps", copy_gbps}, {"heads", s.hq}, {"kv_heads", s.hk}, {"head_dim", s.d},
                    {"block_size", s.block_size}, {"dtype", DTypeName(s.dtype)}, {"results", rows}});
  return 0;
}

}  // namespace seam::bench

// seam-bench-gpu latent-attention: PagedLatentAttention decode alone at
// LongCat-Flash's / DeepSeek's absorbed shapes (default: 64 heads, Dc 512,
// Dr 64, bf16, blocks of 16), replayed from a CUDA graph, against two floors
// measured in the same run: the bytes it must move (each sequence's latent
// rows read once, context x (Dc + Dr) x 2 bytes, plus q and out) at the
// device copy bandwidth, and its FLOPs (2 x Hq x context x (2 Dc + Dr) per
// sequence) at seam's bf16 matmul rate. Batches x contexts, one query row
// per sequence; blocks handed out from a shuffled pool. --table-context N
// sizes every block table for N positions (a serving table, its spare
// columns -1), so the kernel's splits follow the table while each call
// reads only its actual context.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "gpu_bench_util.h"
#include "seam/core/cuda_graph.h"
#include "seam/kernels/latent_attention.h"

namespace seam::bench {
namespace {

struct LatentShape {
  int64_t hq, dc, dr, block_size;
  DType dtype;
};

struct LatentBatch {
  Tensor q, out;
  kernels::AttentionBatch attention;
  double bytes = 0, flops = 0;
};

LatentBatch MakeLatentBatch(const LatentShape& s, int64_t batch, int64_t ctx, int64_t table_ctx, int64_t cache_blocks,
                            uint32_t seed) {
  const int64_t used = (ctx + s.block_size - 1) / s.block_size;
  const int64_t width = std::max(used, (table_ctx + s.block_size - 1) / s.block_size);
  std::vector<int32_t> pool(static_cast<size_t>(cache_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  std::vector<int32_t> starts{0}, lens, tables(static_cast<size_t>(batch * width), -1);
  size_t next = 0;
  for (int64_t i = 0; i < batch; ++i) {
    starts.push_back(static_cast<int32_t>(i + 1));
    lens.push_back(static_cast<int32_t>(ctx));
    for (int64_t j = 0; j < used; ++j) tables[i * width + j] = pool[next++];
  }
  auto up = [](const std::vector<int32_t>& v, const Shape& shape) {
    return Value(Tensor::FromInts(v, shape).To(kGpu), "upload");
  };
  LatentBatch b;
  const int64_t row = s.dc + s.dr, elem = DTypeSize(s.dtype);
  b.q = RandomGpu({batch, s.hq, row}, s.dtype, seed + 1, 4.0f);
  b.out = Tensor::Empty({batch, s.hq, s.dc}, s.dtype, kGpu);
  b.attention = {up(starts, {batch + 1}), up(lens, {batch}), up(tables, {batch, width})};
  b.bytes = static_cast<double>(batch) * (ctx * row * elem + s.hq * (row + s.dc) * elem);
  b.flops = 2.0 * batch * s.hq * ctx * (row + s.dc);
  return b;
}

}  // namespace

int LatentAttentionBench(const Flags& flags) {
  const LatentShape s{flags.Int("heads", 64), flags.Int("kv-lora-rank", 512), flags.Int("rope-dim", 64),
                      flags.Int("block-size", 16), ParseDType(flags.Get("dtype", "bf16"))};
  const std::vector<int64_t> batches = flags.Ints("batches", "1,32,128");
  const std::vector<int64_t> contexts = flags.Ints("contexts", "1024,4096,32768");
  const int64_t table_ctx = flags.Int("table-context", 0);
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  const double peak_tflops = Bf16PeakTflops();
  int64_t blocks = 0;
  for (int64_t b : batches) {
    for (int64_t ctx : contexts) blocks = std::max(blocks, b * ((ctx + s.block_size - 1) / s.block_size));
  }
  // One cache for every case, filled with one random slab copied over it.
  const Shape cache_shape{blocks, s.block_size, s.dc + s.dr};
  const Tensor cache = Tensor::Empty(cache_shape, s.dtype, kGpu);
  const Tensor slab = RandomGpu({std::min<int64_t>(NumElements(cache_shape), int64_t{8} << 20)}, s.dtype, 31);
  for (size_t at = 0; at < cache.nbytes(); at += slab.nbytes()) {
    const size_t n = std::min(slab.nbytes(), cache.nbytes() - at);
    Check(SEAM_CUDA_STATUS(cudaMemcpy(static_cast<char*>(cache.raw_data()) + at, slab.raw_data(), n,
                                      cudaMemcpyDeviceToDevice)),
          "fill cache");
  }
  const CudaStream stream = Value(CudaStream::Create(kGpu), "stream");
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.dc / 4 + s.dr));
  json rows = json::array();
  uint32_t seed = 300;
  std::printf("%6s %8s %10s %10s %8s %10s %8s\n", "batch", "context", "us", "floor_us", "x_floor", "flop_us",
              "x_flop");
  for (int64_t ctx : contexts) {
    for (int64_t b : batches) {
      const LatentBatch batch = MakeLatentBatch(s, b, ctx, table_ctx, blocks, ++seed);
      auto call = [&] { return kernels::PagedLatentAttention(batch.q, cache, batch.attention, scale, batch.out); };
      {
        kernels::ScopedStream on(stream.handle());
        Check(call(), "latent attention");  // outside the capture: the stream's split workspace
        Check(stream.Synchronize(), "sync");
      }
      const double us = Value(GraphReplayUs(stream, call, 20), "graph replay");
      const double floor_us = batch.bytes / copy_gbps / 1e3, flop_us = batch.flops / peak_tflops / 1e6;
      std::printf("%6ld %8ld %10.2f %10.2f %8.2f %10.2f %8.2f\n", static_cast<long>(b), static_cast<long>(ctx), us,
                  floor_us, us / floor_us, flop_us, us / flop_us);
      rows.push_back({{"batch", b}, {"context", ctx}, {"us", us}, {"bytes", batch.bytes}, {"floor_us", floor_us},
                      {"floor_ratio", us / floor_us}, {"flops", batch.flops}, {"flop_floor_us", flop_us},
                      {"flop_floor_ratio", us / flop_us}});
    }
  }
  WriteJson(flags, {{"copy_gbps", copy_gbps}, {"bf16_matmul_tflops", peak_tflops}, {"heads", s.hq},
                    {"kv_lora_rank", s.dc}, {"rope_dim", s.dr}, {"block_size", s.block_size},
                    {"table_context", table_ctx}, {"dtype", DTypeName(s.dtype)}, {"results", rows}});
  return 0;
}

}  // namespace seam::bench

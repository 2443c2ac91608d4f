// The paged-attention cases of the CUDA kernel tests: a batch of sequences
// (query rows, context) laid out in a paged cache on the host, the CPU
// reference run beside the CUDA kernels on copies of it, and the tolerances.
//
// Tolerances. f32: both sides sum in fp32 but in different orders (online
// softmax over tiles and warp trees on the GPU, a two-pass sequential softmax
// on the CPU), so results agree to a few fp32 ulps: 1e-5 relative with a 1e-5
// floor (ToleranceFor(f32)). bf16/f16: inputs widen exactly to fp32 on both
// sides and each side rounds its own fp32 result once, which may differ by
// one storage ulp (2^-7 of the value for bf16, 2^-10 for f16); in addition the
// tensor-core kernels (prefill, and decode in bf16/f16) round each
// probability to bf16 (f16) for the P V product, a relative error of at most
// 2^-9 (2^-12) per weight; the output is the weights' convex combination of
// V rows (the sum divides by the rounded weights' own sum), so with |v| <= 1
// here it moves by at most 2 * 2^-9 = 2^-8 (2^-11) absolute whatever the
// context length: an absolute floor of 2^-7 (2^-10), twice that bound.
// Splitting a context over blocks adds no rounding (partials stay fp32).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {

struct Seq {
  int32_t q_len;
  int32_t context;
};

// A paged batch on the host: caches filled with random rows, each sequence's
// blocks drawn from a shuffled pool (so tables are not contiguous), unused
// table columns set to -1 (never read).
struct PagedCase {
  Tensor q, k_cache, v_cache, query_start, context_lens, block_tables;
  float scale = 0.0f;
};

constexpr int64_t kBlockSize = 16;

// table_scale > 1 widens every table to table_scale times the columns the
// longest context needs (the extra columns -1).
inline PagedCase MakeCase(const std::vector<Seq>& seqs, int64_t hq, int64_t hk, int64_t d, DType dtype, uint32_t seed,
                          float q_range = 1.0f, int64_t table_scale = 1, int64_t block_size = kBlockSize) {
  const int64_t b = static_cast<int64_t>(seqs.size());
  int64_t max_blocks = 1, used_blocks = 0, rows = 0;
  std::vector<int32_t> query_start{0}, context_lens;
  for (const Seq& s : seqs) {
    const int64_t used = (s.context + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, used + 1);  // one spare column of -1
    if (table_scale > 1) max_blocks = std::max(max_blocks, std::max<int64_t>(used, 1) * table_scale);
    used_blocks += used;
    rows += s.q_len;
    query_start.push_back(static_cast<int32_t>(rows));
    context_lens.push_back(s.context);
  }
  const int64_t num_blocks = used_blocks + 3;  // a few blocks nobody owns
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937 gen(seed);
  std::shuffle(pool.begin(), pool.end(), gen);
  std::vector<int32_t> tables(static_cast<size_t>(b * max_blocks), -1);
  size_t next = 0;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t used = (seqs[i].context + block_size - 1) / block_size;
    for (int64_t j = 0; j < used; ++j) tables[i * max_blocks + j] = pool[next++];
  }
  PagedCase c;
  c.q = Random({rows, hq, d}, dtype, seed + 1, -q_range, q_range);
  c.k_cache = Random({num_blocks, block_size, hk, d}, dtype, seed + 2);
  c.v_cache = Random({num_blocks, block_size, hk, d}, dtype, seed + 3);
  c.query_start = Tensor::FromInts(query_start, {b + 1});
  c.context_lens = Tensor::FromInts(context_lens, {b});
  c.block_tables = Tensor::FromInts(tables, {b, max_blocks});
  c.scale = 1.0f / std::sqrt(static_cast<float>(d));
  return c;
}

inline Tolerance AttentionTolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return {1.0f / 128, 1.0f / 128};
    case DType::kF16:
      return {1.0f / 1024, 1.0f / 1024};
    default:
      return ToleranceFor(dtype);
  }
}

// Runs the case on the CPU and on CUDA and compares the outputs.
inline void ExpectAttentionMatchesCpu(const PagedCase& c, Tolerance tol, const std::string& what) {
  const Tensor out = PoisonedHost(c.q.shape(), c.q.dtype());
  const AttentionBatch batch{c.query_start, c.context_lens, c.block_tables};
  ASSERT_TRUE(PagedAttention(c.q, c.k_cache, c.v_cache, batch, c.scale, out).ok()) << what;
  const AttentionBatch gbatch{OnGpu(c.query_start), OnGpu(c.context_lens), OnGpu(c.block_tables)};
  const Tensor gout = PoisonedGpu(c.q.shape(), c.q.dtype());
  const absl::Status status = PagedAttention(OnGpu(c.q), OnGpu(c.k_cache), OnGpu(c.v_cache), gbatch, c.scale, gout);
  ASSERT_TRUE(status.ok()) << what << ": " << status;
  ExpectClose(gout, out, tol, what);
}

inline std::vector<Seq> Decode(const std::vector<int32_t>& contexts) {
  std::vector<Seq> seqs;
  for (int32_t ctx : contexts) seqs.push_back({1, ctx});
  return seqs;
}

}  // namespace seam::kernels::cuda_test

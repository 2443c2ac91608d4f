// Paged KV cache writes and causal grouped-query attention over the cache on
// the CPU. For each (sequence, kv head) the cached keys and values are widened
// to fp32 once, then every query row of the heads sharing that kv head runs a
// two-pass softmax (max subtraction, fp32 sums) over the positions it may see.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"
#include "seam/core/status.h"

namespace seam::kernels::cpu {

absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache) {
  const int64_t rows = k.dim(0), row_elems = k.row_numel();
  const int64_t slots = k_cache.dim(0) * k_cache.dim(1);
  const int32_t* slot = slot_mapping.data<int32_t>();
  for (int64_t t = 0; t < rows; ++t) {
    if (slot[t] >= slots) {
      return absl::InvalidArgumentError(absl::StrCat("slot_mapping[", t, "] = ", slot[t],
                                                     " is past the cache's ", slots, " slots"));
    }
  }
  std::vector<float> buf(row_elems);
  for (int64_t t = 0; t < rows; ++t) {
    if (slot[t] < 0) continue;  // padding token
    LoadFloats(k.raw_data(), k.dtype(), t * row_elems, row_elems, buf.data());
    StoreFloats(buf.data(), row_elems, k_cache.raw_data(), k_cache.dtype(), slot[t] * row_elems);
    LoadFloats(v.raw_data(), v.dtype(), t * row_elems, row_elems, buf.data());
    StoreFloats(buf.data(), row_elems, v_cache.raw_data(), v_cache.dtype(), slot[t] * row_elems);
  }
  return absl::OkStatus();
}

absl::Status CheckAttentionBatch(const AttentionBatch& batch, int64_t q_rows, int64_t num_blocks, int64_t block_size) {
  const int64_t seqs = batch.context_lens.dim(0), max_blocks = batch.block_tables.dim(1);
  const int32_t* qs = batch.query_start.data<int32_t>();
  const int32_t* ctx = batch.context_lens.data<int32_t>();
  const int32_t* table = batch.block_tables.data<int32_t>();
  if (qs[0] != 0 || qs[seqs] != q_rows) {
    return absl::InvalidArgumentError(absl::StrCat("query_start must run from 0 to q's ", q_rows,
                                                   " rows, got ", qs[0], " .. ", qs[seqs]));
  }
  for (int64_t b = 0; b < seqs; ++b) {
    const int64_t q_len = qs[b + 1] - qs[b];
    if (ctx[b] < 0 || q_len < 0 || q_len > ctx[b]) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", b, ": ", q_len,
                                                     " query rows do not fit context_lens = ", ctx[b]));
    }
    const int64_t used = (ctx[b] + block_size - 1) / block_size;
    if (used > max_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", b, ": context_lens = ", ctx[b], " needs ", used,
                                                     " blocks but block_tables has ", max_blocks, " columns"));
    }
    for (int64_t j = 0; j < used; ++j) {
      const int32_t block = table[b * max_blocks + j];
      if (block < 0 || block >= num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("block_tables[", b, ", ", j, "] = ", block,
                                                       " is outside the cache's ", num_blocks, " blocks"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// dst[p, D] = the cache's row for (position p, kv head g) as fp32, p < ctx.
void GatherHead(const Tensor& cache, const int32_t* table, int64_t ctx, int64_t g, std::vector<float>& dst) {
  const int64_t block_size = cache.dim(1), hk = cache.dim(2), d = cache.dim(3);
  dst.resize(ctx * d);
  for (int64_t p = 0; p < ctx; ++p) {
    const int64_t slot = static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size;
    LoadFloats(cache.raw_data(), cache.dtype(), (slot * hk + g) * d, d, dst.data() + p * d);
  }
}

}  // namespace

absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out) {
  const int64_t hq = q.dim(1), d = q.dim(2), hk = k_cache.dim(2);
  SEAM_RETURN_IF_ERROR(CheckAttentionBatch(batch, q.dim(0), k_cache.dim(0), k_cache.dim(1)));
  const int64_t seqs = batch.context_lens.dim(0), max_blocks = batch.block_tables.dim(1);
  const int64_t group = hq / hk;
  const int32_t* qs = batch.query_start.data<int32_t>();
  const int32_t* ctx_lens = batch.context_lens.data<int32_t>();
  std::vector<float> keys, values, scores, qrow(d), acc(d);
  for (int64_t b = 0; b < seqs; ++b) {
    const int64_t q_len = qs[b + 1] - qs[b], ctx = ctx_lens[b];
    if (q_len == 0) continue;
    const int32_t* table = batch.block_tables.data<int32_t>() + b * max_blocks;
    scores.resize(ctx);
    for (int64_t g = 0; g < hk; ++g) {
      GatherHead(k_cache, table, ctx, g, keys);
      GatherHead(v_cache, table, ctx, g, values);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < q_len; ++i) {
          const int64_t row = qs[b] + i;
          const int64_t visible = ctx - q_len + i + 1;  // positions 0 .. own position
          LoadFloats(q.raw_data(), q.dtype(), (row * hq + h) * d, d, qrow.data());
          float max_score = -INFINITY;
          for (int64_t p = 0; p < visible; ++p) {
            scores[p] = Dot(qrow.data(), keys.data() + p * d, d) * scale;
            max_score = std::max(max_score, scores[p]);
          }
          float denom = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t p = 0; p < visible; ++p) {
            const float e = std::exp(scores[p] - max_score);
            denom += e;
            const float* vrow = values.data() + p * d;
            for (int64_t j = 0; j < d; ++j) acc[j] += e * vrow[j];
          }
          const float inv = 1.0f / denom;
          for (int64_t j = 0; j < d; ++j) acc[j] *= inv;
          StoreFloats(acc.data(), d, out.raw_data(), out.dtype(), (row * hq + h) * d);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu

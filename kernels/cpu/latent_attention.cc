// Latent cache writes and absorbed multi-head latent attention on the CPU.
// For each sequence the latent rows it may read are widened to fp32 once;
// then chunks of its query rows (all heads together) take their scores as
// one OpenBLAS sgemm against the rows, a two-pass softmax per (row, head)
// over the positions it may see (max subtraction, fp32 sums), and the output
// as a second sgemm of the probabilities with the rows' first Dc entries.
// The OpenBLAS pool (cpu_threads.h) threads both products.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"
#include "seam/core/status.h"

namespace seam::kernels::cpu {
namespace {

// Score entries of one chunk: about 16 MiB of fp32.
constexpr int64_t kChunkScoreFloats = int64_t{4} << 20;

// dst[p, width] = the latent rows of positions p < ctx as fp32.
void GatherRows(const Tensor& cache, const int32_t* table, int64_t ctx, std::vector<float>& dst) {
  const int64_t block_size = cache.dim(1), width = cache.dim(2);
  dst.resize(ctx * width);
  for (int64_t p = 0; p < ctx; ++p) {
    const int64_t slot = static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size;
    LoadFloats(cache.raw_data(), cache.dtype(), slot * width, width, dst.data() + p * width);
  }
}

// Turns each of `rows` score rows (stride `ld`) into unnormalized
// probabilities exp(scale·s - max) over its first visible(r) entries, zeroes
// the rest, and returns 1 / Σ of each row in inv_sum.
template <typename Visible>
void SoftmaxRows(float* scores, int64_t rows, int64_t ld, float scale, Visible visible, float* inv_sum) {
  for (int64_t r = 0; r < rows; ++r) {
    float* s = scores + r * ld;
    const int64_t n = visible(r);
    float max_score = -INFINITY;
    for (int64_t p = 0; p < n; ++p) {
      s[p] *= scale;
      max_score = std::max(max_score, s[p]);
    }
    float sum = 0.0f;
    for (int64_t p = 0; p < n; ++p) {
      s[p] = std::exp(s[p] - max_score);
      sum += s[p];
    }
    std::fill(s + n, s + ld, 0.0f);
    inv_sum[r] = 1.0f / sum;
  }
}

}  // namespace

absl::Status WriteLatentCache(const Tensor& latent, const Tensor& slot_mapping, const Tensor& latent_cache) {
  const int64_t rows = latent.dim(0), width = latent.dim(1);
  const int64_t slots = latent_cache.dim(0) * latent_cache.dim(1);
  const int32_t* slot = slot_mapping.data<int32_t>();
  for (int64_t t = 0; t < rows; ++t) {
    if (slot[t] >= slots) {
      return absl::InvalidArgumentError(absl::StrCat("slot_mapping[", t, "] = ", slot[t],
                                                     " is past the latent cache's ", slots, " slots"));
    }
  }
  std::vector<float> buf(width);
  for (int64_t t = 0; t < rows; ++t) {
    if (slot[t] < 0) continue;  // padding token
    LoadFloats(latent.raw_data(), latent.dtype(), t * width, width, buf.data());
    StoreFloats(buf.data(), width, latent_cache.raw_data(), latent_cache.dtype(), slot[t] * width);
  }
  return absl::OkStatus();
}

absl::Status PagedLatentAttention(const Tensor& q, const Tensor& latent_cache, const AttentionBatch& batch,
                                  float scale, const Tensor& out) {
  const int64_t hq = q.dim(1), width = q.dim(2), dc = out.dim(2);
  SEAM_RETURN_IF_ERROR(CheckAttentionBatch(batch, q.dim(0), latent_cache.dim(0), latent_cache.dim(1)));
  if (hq == 0) return absl::OkStatus();
  const int64_t seqs = batch.context_lens.dim(0), max_blocks = batch.block_tables.dim(1);
  const int32_t* qs = batch.query_start.data<int32_t>();
  const int32_t* ctx_lens = batch.context_lens.data<int32_t>();
  std::vector<float> rows, qf, scores, inv_sum, acc;
  for (int64_t b = 0; b < seqs; ++b) {
    const int64_t q_len = qs[b + 1] - qs[b], ctx = ctx_lens[b];
    if (q_len == 0) continue;
    GatherRows(latent_cache, batch.block_tables.data<int32_t>() + b * max_blocks, ctx, rows);
    const int64_t chunk = std::clamp<int64_t>(kChunkScoreFloats / (hq * ctx), 1, q_len);
    for (int64_t i0 = 0; i0 < q_len; i0 += chunk) {
      const int64_t n = std::min(chunk, q_len - i0);
      const int64_t m = n * hq;                   // (query row, head) pairs of the chunk
      const int64_t first = ctx - q_len + i0;     // position of the chunk's first query row
      const int64_t seen = first + n;             // positions the chunk's last row sees
      const int64_t q_offset = (qs[b] + i0) * hq;  // first (row, head) of the chunk in q and out
      qf.resize(m * width);
      scores.resize(m * seen);
      inv_sum.resize(m);
      acc.resize(m * dc);
      LoadFloats(q.raw_data(), q.dtype(), q_offset * width, m * width, qf.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(seen),
                  static_cast<blasint>(width), 1.0f, qf.data(), static_cast<blasint>(width), rows.data(),
                  static_cast<blasint>(width), 0.0f, scores.data(), static_cast<blasint>(seen));
      SoftmaxRows(scores.data(), m, seen, scale, [&](int64_t r) { return first + r / hq + 1; }, inv_sum.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(dc),
                  static_cast<blasint>(seen), 1.0f, scores.data(), static_cast<blasint>(seen), rows.data(),
                  static_cast<blasint>(width), 0.0f, acc.data(), static_cast<blasint>(dc));
      for (int64_t r = 0; r < m; ++r) {
        float* o = acc.data() + r * dc;
        for (int64_t j = 0; j < dc; ++j) o[j] *= inv_sum[r];
      }
      StoreFloats(acc.data(), m * dc, out.raw_data(), out.dtype(), q_offset * dc);
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu

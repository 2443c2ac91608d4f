// What the tensor-core latent attention kernel (latent_attention_mma.cu) and
// its split merge (latent_merge.cu) agree on (internal to kernels/cuda): the
// pack of (query row, head) pairs a thread block serves and how it is found,
// how a pack's visible keys divide over the splits of the grid, the layout
// of the split partials in the stream's workspace, and how an output pair is
// stored. Device code only reads LatentParams; nothing here owns memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "latent_attention.cuh"

namespace seam::kernels::cuda::mla {

constexpr int kDc = 512, kDr = 64, kWidth = kDc + kDr;
constexpr int kKeys = 32;       // keys per chunk
constexpr int kMinChunks = 2;   // a split streams at least this many chunks (64 keys)
constexpr int kMaxSplits = 256;
constexpr unsigned kFullMask = 0xffffffffu;

// What a block runs: its pack's rows and the positions they sit at.
struct Pack {
  int64_t row0;    // global query row of pack row 0
  int rows;        // valid query rows (qn) of the pack
  int nh;          // heads per query row in a pack
  int heads;       // heads of this head chunk (<= nh)
  int h0;
  int first_pos;   // position of the pack's first query row
  int limit;       // keys the last row sees
};

__device__ __forceinline__ bool RowValid(const Pack& k, int m) { return m / k.nh < k.rows && m % k.nh < k.heads; }
__device__ __forceinline__ int PosOf(const Pack& k, int m) { return k.first_pos + min(m / k.nh, k.rows - 1); }

// Finds the (sequence, pack) of pack number j, packs numbered sequence by
// sequence with ceil(q_len / qpp) each, into *seq (-1 past the last pack)
// and *pack (shared memory); warp-wide.
__device__ inline void FindPack(const LatentParams& p, int qpp, int j, int* seq, int* pack) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  int base = 0;
  if (lane == 0) *seq = -1;
  __syncwarp();
  for (int b0 = 0; b0 < p.num_seqs; b0 += 32) {
    const int b = b0 + lane;
    const int q_len = b < p.num_seqs ? p.query_start[b + 1] - p.query_start[b] : 0;
    const int packs = q_len > 0 ? (q_len + qpp - 1) / qpp : 0;
    int incl = packs;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int up = __shfl_up_sync(kFullMask, incl, offset);
      if (lane >= offset) incl += up;
    }
    const int excl = incl - packs;
    if (packs > 0 && j >= base + excl && j < base + incl) {
      *seq = b;
      *pack = j - base - excl;
    }
    base += __shfl_sync(kFullMask, incl, 31);
    if (base > j) break;
  }
}

// The pack of sequence b whose first query row is r0, for head chunk hc.
__device__ __forceinline__ Pack PackOf(const LatentParams& p, int b, int r0, int nh, int qpp, int hc) {
  const int q_begin = p.query_start[b], q_len = p.query_start[b + 1] - q_begin;
  Pack k;
  k.row0 = static_cast<int64_t>(q_begin) + r0;
  k.rows = min(qpp, q_len - r0);
  k.nh = nh;
  k.h0 = hc * nh;
  k.heads = min(nh, p.hq - k.h0);
  k.first_pos = LatentContextOf(p, b) - q_len + r0;
  k.limit = k.first_pos + k.rows;
  return k;
}

// How the pack's visible keys divide over `splits` splits: an equal share of
// whole chunks each (at least kMinChunks), `active` splits holding keys (1
// when nothing is visible). The attention and merge kernels agree on it.
struct Share {
  int chunks, per, active;
};
__device__ __forceinline__ Share ShareOf(const Pack& k, int splits) {
  Share s;
  s.chunks = k.limit > 0 ? (k.limit + kKeys - 1) / kKeys : 0;
  s.per = max((s.chunks + splits - 1) / splits, kMinChunks);
  s.active = s.chunks > 0 ? (s.chunks + s.per - 1) / s.per : 1;
  return s;
}

// Partials of split `split` of unit (pack, head chunk) `unit` among `slots`
// = units x splits: [kR][kDc] unnormalised output rows, then after every
// slot's rows, [kR][2] (max in the log2 domain, sum). The splits of a unit
// are consecutive slots: split i's rows sit i * kR * kDc floats after split
// 0's, its statistics i * kR * 2 floats after.
template <int kMt>
struct Partials {
  float* o;
  float* ml;
  __device__ __forceinline__ Partials(float* base, size_t unit, int splits, int split, size_t slots) {
    constexpr size_t kR = kMt * 16;
    const size_t slot = unit * splits + split;
    o = base + slot * kR * kDc;
    ml = base + slots * kR * kDc + slot * kR * 2;
  }
};

// Output columns col, col + 1 of pack row m, rounded to bf16 (nothing for a
// row outside the pack).
__device__ __forceinline__ void StorePair(const LatentParams& p, const Pack& k, int m, int col, float x, float y) {
  if (!RowValid(k, m)) return;
  const int64_t row = k.row0 + m / k.nh;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + (row * p.hq + k.h0 + m % k.nh) * kDc + col;
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(x, y);
}

// The grid a split attention launch chose (grid (packs, splits, head
// chunks) of packs of kMt = mt m tiles, nh heads and qpp query rows), which
// its merge reuses.
struct SplitGrid {
  int mt;
  int nh;
  int qpp;
  int64_t packs;
  int64_t head_chunks;
  int splits;
  const float* partials;  // the stream's split workspace
  int sms;                // multiprocessors of the device
};

// latent_merge.cu: merges the partials of every pack that split (active > 1)
// into p.out; launched on `stream` after the attention kernel that wrote
// them. INVALID_ARGUMENT for an m tile count other than 1, 2 or 4 or a split
// count outside 2 .. kMaxSplits.
absl::Status LaunchLatentMerge(const LatentParams& p, const SplitGrid& g, cudaStream_t stream);

}  // namespace seam::kernels::cuda::mla

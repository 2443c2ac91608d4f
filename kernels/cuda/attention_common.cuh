// Shared device pieces of the paged-attention kernels (internal to
// kernels/cuda): the launch parameters, the prologue every kernel starts with
// (a sequence's query rows, context length and block-table row, cache slots
// through the table, the head group of a decode block, the query tile of a
// prefill block) and the launchers one attention file calls in another.
#pragma once

#include <cstdint>

#include "cuda_common.cuh"

namespace seam::kernels::cuda::attn {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxSplits = 8;  // the portable cluster size (decode splits)
constexpr int kTileRows = 64;  // query rows per prefill block

// ---- parameters and prologue ----------------------------------------------------------

struct AttnParams {
  const void* q;        // [T, Hq, D]
  const void* k_cache;  // [num_blocks, block_size, Hk, D]
  const void* v_cache;
  void* out;  // [T, Hq, D]
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_tables;
  int64_t q_rows;
  int num_seqs;
  int max_blocks;
  int block_size;
  int num_blocks;
  int hq;
  int hk;
  int group;  // hq / hk
  int head_dim;
  float scale;
  // Set by the tensor-core decode path (decode_attention_mma.cu), zero
  // otherwise: sequences of 1 .. short_q_max query rows are that kernel's,
  // and the prefill kernels skip them; with decode_all the decode kernel
  // takes every sequence (no prefill launch).
  int short_q_max;
  int decode_all;
};

// Cache slot of position pos through a sequence's block table, or -1 when the
// table names a block outside the cache (read as a zero row).
__device__ __forceinline__ int64_t SlotOf(const int32_t* table, int pos, const AttnParams& p) {
  const int32_t block = table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return static_cast<int64_t>(block) * p.block_size + pos % p.block_size;
}

// Context length of sequence b, cut to what its block table row can hold.
__device__ __forceinline__ int ContextOf(const AttnParams& p, int b) {
  const int ctx = p.context_lens[b];
  const int cap = p.max_blocks * p.block_size;
  return ctx < cap ? ctx : cap;
}

// Cache row of position pos like SlotOf, as 32 bits: only for caches of at
// most 2^31 - 1 rows (checked by the launcher).
__device__ __forceinline__ int RowOf(const int32_t* table, int pos, const AttnParams& p) {
  const int32_t block = table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.block_size + pos % p.block_size;
}

// Sequence b of the batch: its query rows q_begin .. q_begin + q_len - 1, its
// context length (cut to the table) and its block-table row.
struct SeqView {
  int q_begin;
  int q_len;
  int ctx;
  const int32_t* table;
};

__device__ __forceinline__ SeqView SeqOf(const AttnParams& p, int b) {
  SeqView s;
  s.q_begin = p.query_start[b];
  s.q_len = p.query_start[b + 1] - s.q_begin;
  s.ctx = ContextOf(p, b);
  s.table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  return s;
}

// The query heads of a decode block: blockIdx.z = kv head g * chunks + chunk
// serves up to `heads` query heads h0 .. h0 + nh - 1, all sharing kv head g.
struct HeadGroup {
  int g;
  int h0;
  int nh;
};

__device__ __forceinline__ HeadGroup HeadGroupOf(const AttnParams& p, int heads) {
  const int chunks = (p.group + heads - 1) / heads;
  const int g = static_cast<int>(blockIdx.z) / chunks;
  const int chunk = static_cast<int>(blockIdx.z) % chunks;
  const int rest = p.group - chunk * heads;
  return {g, g * p.group + chunk * heads, rest < heads ? rest : heads};
}

// The query tile of a prefill block: rows q0 .. q0 + rows - 1 of a
// sequence's query rows (at most kTileRows), row r at position first_pos + r.
struct QueryTile {
  int rows;
  int first_pos;
  int last_pos;
};

__device__ __forceinline__ QueryTile QueryTileOf(const SeqView& s, int q0) {
  QueryTile t;
  t.rows = s.q_len - q0 < kTileRows ? s.q_len - q0 : kTileRows;
  t.first_pos = s.ctx - s.q_len + q0;
  t.last_pos = t.first_pos + t.rows - 1;
  return t;
}

// Finds the (sequence, first row) of tile j, tiles numbered sequence
// by sequence (a sequence of at most p.short_q_max rows has none: the decode
// kernel takes it); sequence -1 when the tile is past the last one.
__device__ inline void FindTile(const AttnParams& p, int j, int* seq, int* first_row) {
  const int lane = threadIdx.x % 32;
  int base = 0;
  if (lane == 0) *seq = -1;
  __syncwarp();
  for (int b0 = 0; b0 < p.num_seqs; b0 += 32) {
    const int b = b0 + lane;
    int tiles = 0;
    if (b < p.num_seqs) {
      const int q_len = p.query_start[b + 1] - p.query_start[b];
      tiles = q_len > p.short_q_max ? (q_len + kTileRows - 1) / kTileRows : 0;
    }
    int incl = tiles;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int up = __shfl_up_sync(kFullMask, incl, offset);
      if (lane >= offset) incl += up;
    }
    const int excl = incl - tiles;
    if (tiles > 0 && j >= base + excl && j < base + incl) {
      *seq = b;
      *first_row = (j - base - excl) * kTileRows;
    }
    base += __shfl_sync(kFullMask, incl, 31);
    if (base > j) break;
  }
}

// The number of query tiles of the batch (as FindTile numbers them), in
// every lane of the calling warp.
__device__ inline int CountTiles(const AttnParams& p) {
  const int lane = threadIdx.x % 32;
  int total = 0;
  for (int b0 = 0; b0 < p.num_seqs; b0 += 32) {
    const int b = b0 + lane;
    int tiles = 0;
    if (b < p.num_seqs) {
      const int q_len = p.query_start[b + 1] - p.query_start[b];
      tiles = q_len > p.short_q_max ? (q_len + kTileRows - 1) / kTileRows : 0;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) tiles += __shfl_xor_sync(kFullMask, tiles, offset);
    total += tiles;
  }
  return total;
}

// ---- launchers across the attention files -------------------------------------------------
// Each takes validated parameters (see PagedAttention in attention.cu) and
// launches on `stream`; T is float, __nv_bfloat16 or __half unless noted.

// decode_attention.cu: one query row per sequence (T == B).
template <typename T>
absl::Status LaunchDecode(const AttnParams& p, cudaStream_t stream);

// decode_attention_warp.cu: the warp-parallel decode kernel, for rows of at
// most 32 16-byte vectors, 16-byte aligned q and caches and caches of fewer
// than 2^31 rows; `sms` is the GPU's SM count.
template <typename T>
absl::Status LaunchDecodeWarp(const AttnParams& p, int sms, cudaStream_t stream);

// decode_attention_mma.cu: the tensor-core decode kernel, for T bf16 or f16,
// head_dim 64, 128 or 256, 16-byte aligned q and caches and caches of fewer
// than 2^31 rows (DecodeMmaApplies). It takes the sequences of 1 ..
// p.short_q_max query rows (every sequence when p.decode_all); the caller
// sets p.short_q_max to DecodeMmaShortRows(p), the most rows whose heads fit
// one mma tile.
bool DecodeMmaApplies(const AttnParams& p, DType dtype);
int DecodeMmaShortRows(const AttnParams& p);
template <typename T>
absl::Status LaunchDecodeMma(const AttnParams& p, cudaStream_t stream);

// prefill_attention.cu: prefill and chunked prefill (anything but decode;
// with p.short_q_max set, only the longer sequences).
template <typename T>
absl::Status LaunchPrefill(const AttnParams& p, cudaStream_t stream);

// prefill_attention_wmma.cu: WMMA tensor cores; T bf16 or f16, kD 64, 128 or
// 256, 16-byte aligned q and caches.
template <typename T, int kD>
absl::Status LaunchPrefillTc(const AttnParams& p, cudaStream_t stream);

// prefill_attention_mma.cu: FlashAttention-2 style mma.sync; T bf16 or f16,
// kD 64 or 128, 16-byte aligned q and caches, out aligned to pairs, caches
// of fewer than 2^31 rows.
template <typename T, int kD>
absl::Status LaunchPrefillFa(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn

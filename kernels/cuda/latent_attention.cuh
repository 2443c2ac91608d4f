// Shared pieces of the latent-attention kernels (internal to kernels/cuda):
// the launch parameters, the causal view of a pack of (query row, head)
// pairs, and the launchers latent_attention.cu picks between.
#pragma once

#include <cstdint>

#include "cuda_common.cuh"

namespace seam::kernels::cuda::mla {

struct LatentParams {
  const void* q;             // [T, Hq, width]
  const void* cache;         // [num_blocks, block_size, width]
  void* out;                 // [T, Hq, dc]
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_tables;
  int64_t q_rows;
  int num_seqs;
  int max_blocks;
  int block_size;
  int num_blocks;
  int hq;
  int width;  // Dc + Dr
  int dc;
  float scale;
};

// Context length of sequence b, cut to what its block table row can hold.
__device__ __forceinline__ int LatentContextOf(const LatentParams& p, int b) {
  const int ctx = p.context_lens[b];
  const int cap = p.max_blocks * p.block_size;
  return ctx < cap ? ctx : cap;
}

// Cache row of position pos through a block table row, or -1 when the table
// names a block outside the cache (read as a zero row). 32 bits: the
// launcher checks the cache has fewer than 2^31 rows.
__device__ __forceinline__ int LatentRowOf(const LatentParams& p, const int32_t* table, int pos) {
  const int32_t block = table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.block_size + pos % p.block_size;
}

// latent_attention_simple.cu: one thread block per (query row, head), fp32
// arithmetic, any dtypes of q / cache (T, C: float, __nv_bfloat16, __half).
template <typename T, typename C>
absl::Status LaunchLatentSimple(const LatentParams& p, cudaStream_t stream);

// latent_attention_mma.cu: tensor cores for bf16 q and cache, Dc 512, Dr 64,
// 16-byte aligned q, cache and out (LatentMmaApplies). `decode` says every
// sequence has at most one query row (T == B), which sizes the head tiles.
bool LatentMmaApplies(const LatentParams& p);
absl::Status LaunchLatentMma(const LatentParams& p, bool decode, cudaStream_t stream);

}  // namespace seam::kernels::cuda::mla

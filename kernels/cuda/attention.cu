// Paged KV-cache writes and causal grouped-query attention over the cache on
// CUDA, matching kernels/cpu/attention.cc (fp32 softmax with max subtraction,
// fp32 accumulation, one rounding of the output).
//
// Design. Every grid size depends on shapes only (T, B, heads, max_blocks, D),
// never on index values, and no launcher synchronises or allocates, so all of
// them can be captured in a CUDA graph. Index values the host cannot check
// without a sync are made harmless on the device: a slot past the cache is
// skipped, a block id outside the cache reads as a zero row, a context longer
// than the block table is cut to the table.
//
//  * WriteKvCache: one thread block per token row, 16-byte vectors, converting
//    between the k/v dtype and the cache dtype.
//  * Decode (T == B, i.e. one query row per sequence, since every sequence has
//    at least one row): one thread block per (sequence, kv head, group of up
//    to 8 query heads sharing it), so each K/V row is read once for the whole
//    group. Rows of at most 32 16-byte vectors (bf16/f16 up to head_dim 256,
//    f32 up to 128) take the warp-parallel kernel: every warp streams its own
//    chunks of keys (sub-warps of lanes per key, each lane one 16-byte slice,
//    a chunk's K and V rows loaded together, the block-table entries of its
//    first chunk read before the context length is known) with an online
//    softmax and the V sums in registers, and one barrier merges the warps.
//    When the blocks would fill less than half of the GPU's warp slots, a
//    block becomes a cluster of up to 8 blocks splitting the chunks (at least
//    two chunks each, with only as many warps as its share needs), merged by
//    rank 0 through distributed shared memory (no workspace, one kernel). Other rows take the older tiled kernel (tiles of 128 tokens
//    staged in shared memory, clusters when SMs would idle).
//  * Prefill and chunked prefill (anything else): one thread block per (tile
//    of 64 query rows of one sequence, query head), streaming K/V tiles
//    through shared memory with an online softmax per row; key tiles entirely
//    in the causal future of the query tile are never loaded. Tiles are
//    numbered over all sequences; each block finds its (sequence, first row)
//    by a warp scan of query_start, and the grid is sized by the bound
//    ceil(T / 64) + B on the number of tiles (blocks past the end exit).
//    bf16/f16 with head_dim 64 or 128 run a FlashAttention-2 style kernel
//    (mma.sync with the accumulators, softmax and probabilities in registers,
//    K/V double-buffered by cp.async); head_dim 256 runs both products as
//    WMMA steps with the output in shared memory. Both use fp32 accumulation
//    and round the probabilities to bf16/f16 for the P V product. Every other
//    case runs a kernel of fp32 FMAs.
//
// Files: kv_cache_write.cu (WriteKvCache), decode_attention.cu (the decode
// choice and the tiled decode kernel), decode_attention_warp.cu,
// prefill_attention.cu (the prefill choice and the fp32 kernel),
// prefill_attention_mma.cu (FlashAttention-2 style), prefill_attention_wmma.cu,
// and attention_common.cuh (parameters, prologue, launchers). This file
// validates what the dispatcher cannot and picks decode or prefill.
#include "attention_common.cuh"
#include "cuda_ops.h"

namespace seam::kernels::cuda {

absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out) {
  const DType dtype = q.dtype();
  if (k_cache.dtype() != dtype || v_cache.dtype() != dtype || out.dtype() != dtype) {
    return absl::UnimplementedError(absl::StrCat("PagedAttention: CUDA kernels take q, caches and out of one dtype, got q ",
                                                 DTypeName(dtype), ", k_cache ", DTypeName(k_cache.dtype()),
                                                 ", v_cache ", DTypeName(v_cache.dtype()), ", out ",
                                                 DTypeName(out.dtype())));
  }
  const int64_t rows = q.dim(0), seqs = batch.context_lens.dim(0), d = q.dim(2);
  if (rows == 0 || seqs == 0 || q.dim(1) == 0 || d == 0) return absl::OkStatus();
  if (d > attn::kMaxHeadDim) {
    return absl::UnimplementedError(
        absl::StrCat("PagedAttention: CUDA kernels take head_dim up to ", attn::kMaxHeadDim, ", got ", d));
  }
  if (rows > 0x7fffffff || seqs > 0x7fffffff || batch.block_tables.dim(1) * k_cache.dim(1) > 0x7fffffff) {
    return absl::InvalidArgumentError("PagedAttention: batch too large for 32-bit positions");
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(q, "PagedAttention"));
  attn::AttnParams p{};
  p.q = q.raw_data();
  p.k_cache = k_cache.raw_data();
  p.v_cache = v_cache.raw_data();
  p.out = out.raw_data();
  p.query_start = batch.query_start.data<int32_t>();
  p.context_lens = batch.context_lens.data<int32_t>();
  p.block_tables = batch.block_tables.data<int32_t>();
  p.q_rows = rows;
  p.num_seqs = static_cast<int>(seqs);
  p.max_blocks = static_cast<int>(batch.block_tables.dim(1));
  p.block_size = static_cast<int>(k_cache.dim(1));
  p.num_blocks = static_cast<int>(k_cache.dim(0));
  p.hq = static_cast<int>(q.dim(1));
  p.hk = static_cast<int>(k_cache.dim(2));
  p.group = p.hq / p.hk;
  p.head_dim = static_cast<int>(d);
  p.scale = scale;
  if (p.max_blocks == 0) return absl::OkStatus();  // every context is empty
  const cudaStream_t stream = Stream();
  // Every sequence has at least one query row, so T == B means one row each.
  const bool decode = rows == seqs;
  return DispatchFloat(dtype, "q", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return decode ? attn::LaunchDecode<T>(p, stream) : attn::LaunchPrefill<T>(p, stream);
  });
}

}  // namespace seam::kernels::cuda

// Paged KV-cache writes and causal grouped-query attention over the cache on
// CUDA, matching kernels/cpu/attention.cc (fp32 softmax with max subtraction,
// fp32 accumulation, one rounding of the output).
//
// Design. Every grid size depends on shapes only (T, B, heads, max_blocks, D),
// never on index values, no launcher synchronises, and none allocates inside
// a capture (the split workspace of a stream comes with its first call
// outside one), so all of them can be captured in a CUDA graph. Index values the host cannot check
// without a sync are made harmless on the device: a slot past the cache is
// skipped, a block id outside the cache reads as a zero row, a context longer
// than the block table is cut to the table.
//
//  * WriteKvCache: one thread block per token row, 16-byte vectors, converting
//    between the k/v dtype and the cache dtype.
//  * Decode rows on tensor cores (bf16/f16, head_dim 64/128/256; see
//    decode_attention_mma.cu): one thread block per (sequence, kv head,
//    context split) packs the query heads sharing the kv head (and, for a
//    short chunk, its rows) into one 16-row mma tile; each warp streams its
//    own 16-key chunks through a cp.async ring; the split count comes from
//    shapes (one wave over the SMs) and each split takes an equal share of
//    the actual context, partials merged by the last split to finish through
//    a per-stream workspace. In a batch that mixes query lengths it takes the
//    sequences of at most 16 / group rows and the prefill kernels the rest:
//    two launches over the two subsets, no host sync.
//  * Other decode rows (f32, other head sizes; T == B): one thread block per
//    (sequence, kv head, group of up to 8 query heads sharing it), so each
//    K/V row is read once for the whole group. Rows of at most 32 16-byte
//    vectors (f32 up to head_dim 128) take the warp-parallel kernel: every
//    warp streams its own chunks of keys with an online softmax and the V
//    sums in registers, and one barrier merges the warps; when the blocks
//    would fill less than half of the GPU's warp slots, a block becomes a
//    cluster of up to 8 blocks merged through distributed shared memory.
//    Other rows take the older tiled kernel.
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
// Files: kv_cache_write.cu (WriteKvCache), decode_attention_mma.cu (tensor
// cores, split contexts; its workspace in split_workspace.cu),
// decode_attention.cu (the CUDA-core decode choice and the tiled kernel),
// decode_attention_warp.cu,
// prefill_attention.cu (the prefill choice and the fp32 kernel),
// prefill_attention_mma.cu (FlashAttention-2 style), prefill_attention_wmma.cu,
// attention_common.cuh (parameters, prologue, launchers) and
// mma_fragments.cuh (mma.sync, ldmatrix, cp.async). This file validates what
// the dispatcher cannot and picks the kernels.
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
  // bf16/f16 of the common head sizes: the tensor-core decode kernel takes
  // the decode rows (and short chunks), and in a mixed batch the prefill
  // kernels take only the longer sequences (two launches, no host sync).
  const bool mma = attn::DecodeMmaApplies(p, dtype);
  if (mma) {
    p.short_q_max = attn::DecodeMmaShortRows(p);
    p.decode_all = decode ? 1 : 0;
  }
  return DispatchFloat(dtype, "q", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if (!mma) return decode ? attn::LaunchDecode<T>(p, stream) : attn::LaunchPrefill<T>(p, stream);
    SEAM_RETURN_IF_ERROR(attn::LaunchDecodeMma<T>(p, stream));
    return decode ? absl::OkStatus() : attn::LaunchPrefill<T>(p, stream);
  });
}

}  // namespace seam::kernels::cuda

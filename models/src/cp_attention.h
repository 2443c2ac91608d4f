// The attention inputs of a context-parallel batch on one CP rank: the
// natural rows of its query rows (its zig-zag chunks, boundary/
// context_parallel.h) and a paged-attention batch with one entry per
// non-empty chunk: the chunk's query rows, the context up to the chunk's
// last token, and its sequence's block table. So each query row attends to
// every earlier token of its sequence, which the rank's cache holds in full
// (the attention writes the K and V of every row). Private to the models
// library.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/kernels/ops.h"
#include "seam/models/kv_cache.h"

namespace seam::models::internal {

struct CpAttention {
  Tensor rows;                        // i32 [t]: natural row of each query row
  kernels::AttentionBatch attention;  // one entry per non-empty chunk
};

// `spans` in the batch's sequence order, already reserved in `cache`.
absl::StatusOr<CpAttention> BuildCpAttention(const KvCache& cache, const std::vector<CacheSpan>& spans,
                                             const boundary::ForwardBatch& batch, Device device);

}  // namespace seam::models::internal

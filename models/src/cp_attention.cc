#include "src/cp_attention.h"

#include "seam/boundary/context_parallel.h"
#include "seam/core/status.h"

namespace seam::models::internal {

absl::StatusOr<CpAttention> BuildCpAttention(const KvCache& cache, const std::vector<CacheSpan>& spans,
                                             const boundary::ForwardBatch& batch, Device device) {
  SEAM_ASSIGN_OR_RETURN(const CacheBatchPlan plan, cache.PlanBatch(spans));
  std::vector<int32_t> query_start = {0}, context_lens, tables;
  for (const boundary::CpChunk& chunk : boundary::ComputeChunks(batch)) {
    if (chunk.rows == 0) continue;
    const CacheSpan& span = spans.at(chunk.sequence);
    query_start.push_back(query_start.back() + static_cast<int32_t>(chunk.rows));
    context_lens.push_back(static_cast<int32_t>(span.start + chunk.offset + chunk.rows));
    const auto table = plan.block_tables.begin() + chunk.sequence * plan.table_width;
    tables.insert(tables.end(), table, table + plan.table_width);
  }
  const int64_t entries = static_cast<int64_t>(context_lens.size());
  CpAttention out;
  SEAM_ASSIGN_OR_RETURN(out.rows, boundary::ComputeRowIndex(batch, device));
  SEAM_ASSIGN_OR_RETURN(out.attention.query_start, Tensor::FromInts(query_start, {entries + 1}).On(device));
  SEAM_ASSIGN_OR_RETURN(out.attention.context_lens, Tensor::FromInts(context_lens, {entries}).On(device));
  SEAM_ASSIGN_OR_RETURN(out.attention.block_tables,
                        Tensor::FromInts(tables, {entries, plan.table_width}).On(device));
  return out;
}

}  // namespace seam::models::internal

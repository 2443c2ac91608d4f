// Context parallelism (the ATTN_CP token axis): a CONTEXT_PARALLEL batch
// splits each sequence of its DP group into 2·cp chunks and CP rank c holds
// chunks c and 2·cp − 1 − c of every sequence (zig-zag, so each rank gets an
// equal share of causal attention work), in that order, sequence by
// sequence. CpRowMap is that token mapping; every CP movement (the entry's
// take of this rank's rows, the gathers back to natural order, the FFN
// exit's return to local rows and its reduce-scatter) uses the same map.
// The attention of a CP batch needs K and V of the whole sequence: its
// compute asks the boundary for them (GatherContext), so a model issues no
// collective itself.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

struct ForwardBatch;

// One contiguous chunk of a sequence: natural rows [begin, begin + rows) of
// the DP group's rows; `offset` is its first row within its sequence.
struct CpChunk {
  int sequence = 0;
  int64_t begin = 0;
  int64_t offset = 0;
  int64_t rows = 0;
};

class CpRowMap {
 public:
  // Chunk k of a sequence of n rows holds its rows [k·n / 2cp, (k+1)·n / 2cp).
  // INVALID_ARGUMENT for cp < 1 or a negative row count.
  static absl::StatusOr<CpRowMap> Make(std::vector<int64_t> sequence_rows, int cp);

  int cp() const { return cp_; }
  const std::vector<int64_t>& sequence_rows() const { return sequence_rows_; }
  int64_t total_rows() const { return total_; }
  // Rank c's chunks in its local row order.
  const std::vector<CpChunk>& ChunksOf(int c) const { return chunks_[c]; }
  int64_t RowsOf(int c) const;
  std::vector<int64_t> Counts() const;  // RowsOf every rank, in rank order
  // The natural row of each of rank c's rows, in local order.
  std::vector<int32_t> NaturalRowsOf(int c) const;
  // Every rank's natural rows, rank after rank (the order of an all-gather).
  std::vector<int32_t> RankMajorNaturalRows() const;
  // For each natural row, its place in RankMajorNaturalRows.
  std::vector<int32_t> GatheredPlaceOfNatural() const;

  // Device index tensors (i32) of the lists above for rank c, built on first
  // use on `device` and kept (a map belongs to one rank's batch).
  absl::StatusOr<Tensor> TakeIndex(int c, Device device) const;      // NaturalRowsOf(c)
  absl::StatusOr<Tensor> RestoreIndex(Device device) const;          // GatheredPlaceOfNatural
  absl::StatusOr<Tensor> RankMajorIndex(Device device) const;        // RankMajorNaturalRows
  absl::StatusOr<Tensor> Ones(int c, Device device) const;           // f32 ones, RowsOf(c)

 private:
  int cp_ = 1;
  int64_t total_ = 0;
  std::vector<int64_t> sequence_rows_;
  std::vector<std::vector<CpChunk>> chunks_;
  mutable std::vector<std::pair<int, Tensor>> cache_;  // (kind · 1024 + rank, tensor); one device per map
};

// Rows of `x` (its natural rows) that this rank holds in a CP batch: the
// rows listed by `index` (a TakeIndex), gathered into a new tensor.
absl::StatusOr<Tensor> TakeRowsByIndex(const Tensor& x, const Tensor& index);

// The model-facing services of a CP batch.
//
// This rank's chunks in local row order: for a CONTEXT_PARALLEL batch its
// zig-zag chunks; for any other batch one chunk per sequence covering the
// DP rows in order (so a model can treat both alike).
std::vector<CpChunk> ComputeChunks(const ForwardBatch& batch);
// The natural rows of this rank's compute rows, in local order (i32 on
// `device`); for a batch that is not context-parallel, undefined.
absl::StatusOr<Tensor> ComputeRowIndex(const ForwardBatch& batch, Device device);
// Every row of this DP group in natural order from `x`, which holds this
// rank's compute rows: in a CONTEXT_PARALLEL batch an all-gather over the CP
// group and a reorder; otherwise `x` itself (it already holds the DP rows).
// INVALID_ARGUMENT when `x` holds another row count.
absl::StatusOr<Tensor> GatherContext(const Tensor& x, ForwardBatch& batch);

}  // namespace seam::boundary

// ForwardBatch: the per-forward facts a boundary reads (microbatch id, batch
// variant, token rows of every attention-DP group) and the residual stream
// that carries state from one boundary to the next. One ForwardBatch per
// microbatch per rank; never shared between interleaved microbatches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/boundary/context_parallel.h"
#include "seam/boundary/layout.h"

namespace seam::boundary {

// Batch variants a stage plan may support.
//   kOrdinary        rows on each DP group; gathers and fixed scatters pad to a common size
//   kUnpadded        the same rows, moved with variable-size collectives and never padded
//   kInputScattered  the stack's input and residual live on each rank's attention-TP slice
//   kSequenceParallel tokens scattered over the TP ranks outside the mixers: the
//                    stack input arrives on the DP rows and its entry keeps this
//                    rank's slice; every sum completes with a reduce-scatter onto
//                    the slice (after a mixer at the next input, after an FFN at
//                    its exit) and every compute input is gathered from slices;
//                    padded like kOrdinary; never an all-reduce
//   kContextParallel each sequence's tokens split over the CP ranks in zig-zag
//                    chunks (context_parallel.h), without attention DP: the
//                    stack input arrives on the DP rows and its entry keeps
//                    this rank's CP rows; attention computes its own rows
//                    against the whole context (GatherContext); FFN inputs and
//                    the final norm gather the CP rows back to natural order;
//                    an FFN sum returns to the CP rows (all-reduce + take, or
//                    a reduce-scatter with the same mapping when attention TP
//                    is 1); a pipeline handoff travels on the DP rows
enum class BatchVariant : uint8_t { kOrdinary, kUnpadded, kInputScattered, kContextParallel, kSequenceParallel };
const char* BatchVariantName(BatchVariant variant);  // "ORDINARY", "UNPADDED", ...
// "ordinary", "unpadded", "input-scattered", "sequence-parallel" (and "sp"), "context-parallel" (and "cp").
absl::StatusOr<BatchVariant> ParseBatchVariant(const std::string& text);
inline constexpr BatchVariant kServedVariants[] = {BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                                   BatchVariant::kInputScattered, BatchVariant::kSequenceParallel,
                                                   BatchVariant::kContextParallel};

// Row arithmetic of one batch on one topology. Padded batches give every DP
// group P = ceil(max_d R_d / attn_tp) · attn_tp rows in collectives and split
// them into attention-TP chunks of P / attn_tp; unpadded batches split a DP
// group's R rows into chunks of ceil(R / attn_tp). Either way a slice holds
// only real rows (the last ones may be short or empty). With one DP group the
// FFN rows are the DP rows themselves (nothing is gathered, nothing padded).
class BatchRows {
 public:
  BatchRows(Topology topology, std::vector<int64_t> dp_rows, bool padded);

  const Topology& topology() const { return topology_; }
  bool padded() const { return padded_; }
  const std::vector<int64_t>& dp_rows() const { return dp_rows_; }
  int64_t my_dp_rows() const { return dp_rows_[topology_.dp_rank()]; }
  int64_t total_rows() const;
  // Rows of each DP group in padded collectives (P above).
  int64_t padded_dp_rows() const;
  // Rows [begin, end) of DP group `dp` that attention-TP rank `a` holds.
  std::pair<int64_t, int64_t> SliceRange(int dp, int a) const;
  int64_t my_slice_begin() const { return SliceRange(topology_.dp_rank(), topology_.attn_tp_rank()).first; }
  int64_t my_slice_rows() const;
  // Row counts of every TP rank's slice, in TP rank order (= FFN row order).
  std::vector<int64_t> TpSliceCounts() const;
  // Slice counts of the ranks of this rank's attention-TP group.
  std::vector<int64_t> AttnTpSliceCounts() const;
  // First FFN row of DP group `dp` (compact or padded placement).
  int64_t FfnOffset(int dp) const;
  // Rows of the FFN row form (compact: Σ R_d; padded: attn_dp · P).
  int64_t FfnRows() const;
  // Rows a tensor of `form` has on this rank (kCpRows: its rows of the CP
  // map, or the DP rows when the batch has none).
  int64_t RowsOf(RowForm form) const;
  // The token mapping of a context-parallel batch (null for other batches).
  const CpRowMap* cp_map() const { return cp_map_.get(); }
  void set_cp_map(std::shared_ptr<const CpRowMap> map) { cp_map_ = std::move(map); }

 private:
  Topology topology_;
  std::vector<int64_t> dp_rows_;
  bool padded_;
  std::shared_ptr<const CpRowMap> cp_map_;
};

class ResidualStream;

struct ForwardBatch {
  ForwardBatch(uint64_t microbatch_id, BatchVariant variant, Topology topology, std::vector<int64_t> dp_rows);
  ~ForwardBatch();
  ForwardBatch(ForwardBatch&&) noexcept;
  ForwardBatch& operator=(ForwardBatch&&) noexcept;

  // Rows of each sequence of this rank's DP group, in row order (empty: the
  // DP rows are one sequence). A context-parallel batch splits each sequence
  // over the CP ranks; set them through SetSequenceRows before Start.
  absl::Status SetSequenceRows(std::vector<int64_t> rows_per_sequence);

  uint64_t microbatch_id;
  BatchVariant variant;
  BatchRows rows;
  std::vector<int64_t> sequence_rows;
  // Whether the attention-DP reduce-scatter may be used for this batch (a
  // batch-time fact: e.g. the DP group is being resized).
  bool rsv_usable = true;
  // Published by an open FFN exit scope: compute may hand its MoE finalize on.
  bool defer_moe_finalize = false;
  // A microbatch of a two-batch overlap run operation by operation
  // (two_batch.h): its FFNs complete with CompleteNow only.
  bool operation_scheduled = false;
  // Exit scopes open on this batch; a two-batch yield point requires none.
  int open_exit_scopes = 0;
  // The communicators of this rank's groups (set by whoever owns the batch).
  StageComms comms;
  // The plan of the stage that finished last (for the final read).
  const struct StagePlan* last_plan = nullptr;
  // Set by Start() (or a pipeline import) and released by FinalNorm/TakeOutput.
  std::unique_ptr<ResidualStream> stream;
};

// Checks that a batch's row counts fit a topology (one count per DP group, none negative).
absl::Status ValidateBatchRows(const Topology& topology, const std::vector<int64_t>& dp_rows);

}  // namespace seam::boundary

#include "seam/boundary/forward_batch.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "seam/boundary/residual_stream.h"
#include "seam/core/status.h"

namespace seam::boundary {

const char* BatchVariantName(BatchVariant variant) {
  switch (variant) {
    case BatchVariant::kOrdinary: return "ORDINARY";
    case BatchVariant::kUnpadded: return "UNPADDED";
    case BatchVariant::kInputScattered: return "INPUT_SCATTERED";
    case BatchVariant::kContextParallel: return "CONTEXT_PARALLEL";
    case BatchVariant::kSequenceParallel: return "SEQUENCE_PARALLEL";
  }
  return "?";
}

absl::StatusOr<BatchVariant> ParseBatchVariant(const std::string& text) {
  if (text == "ordinary") return BatchVariant::kOrdinary;
  if (text == "unpadded") return BatchVariant::kUnpadded;
  if (text == "input-scattered") return BatchVariant::kInputScattered;
  if (text == "sequence-parallel" || text == "sp") return BatchVariant::kSequenceParallel;
  if (text == "context-parallel" || text == "cp") return BatchVariant::kContextParallel;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown batch variant '", text, "' (ordinary, unpadded, input-scattered, sequence-parallel, context-parallel)"));
}

BatchRows::BatchRows(Topology topology, std::vector<int64_t> dp_rows, bool padded)
    : topology_(topology), dp_rows_(std::move(dp_rows)), padded_(padded) {
  SEAM_CHECK_MSG(static_cast<int>(dp_rows_.size()) == topology_.attn_dp, "batch has ", dp_rows_.size(),
                 " DP row counts for attn_dp ", topology_.attn_dp);
}

int64_t BatchRows::total_rows() const { return std::accumulate(dp_rows_.begin(), dp_rows_.end(), int64_t{0}); }

int64_t BatchRows::padded_dp_rows() const {
  const int64_t n = topology_.attn_tp();
  const int64_t max_rows = *std::max_element(dp_rows_.begin(), dp_rows_.end());
  return (max_rows + n - 1) / n * n;
}

std::pair<int64_t, int64_t> BatchRows::SliceRange(int dp, int a) const {
  const int64_t r = dp_rows_[dp];
  const int64_t n = topology_.attn_tp();
  const int64_t chunk = padded_ ? padded_dp_rows() / n : (r + n - 1) / n;
  return {std::min<int64_t>(a * chunk, r), std::min<int64_t>((a + 1) * chunk, r)};
}

int64_t BatchRows::my_slice_rows() const {
  auto [b, e] = SliceRange(topology_.dp_rank(), topology_.attn_tp_rank());
  return e - b;
}

std::vector<int64_t> BatchRows::TpSliceCounts() const {
  std::vector<int64_t> counts;
  for (int d = 0; d < topology_.attn_dp; ++d) {
    for (int a = 0; a < topology_.attn_tp(); ++a) {
      auto [b, e] = SliceRange(d, a);
      counts.push_back(e - b);
    }
  }
  return counts;
}

std::vector<int64_t> BatchRows::AttnTpSliceCounts() const {
  std::vector<int64_t> counts;
  for (int a = 0; a < topology_.attn_tp(); ++a) {
    auto [b, e] = SliceRange(topology_.dp_rank(), a);
    counts.push_back(e - b);
  }
  return counts;
}

int64_t BatchRows::FfnOffset(int dp) const {
  if (topology_.attn_dp == 1) return 0;
  if (padded_) return dp * padded_dp_rows();
  return std::accumulate(dp_rows_.begin(), dp_rows_.begin() + dp, int64_t{0});
}

int64_t BatchRows::FfnRows() const {
  if (topology_.attn_dp == 1) return dp_rows_[0];
  return padded_ ? topology_.attn_dp * padded_dp_rows() : total_rows();
}

int64_t BatchRows::RowsOf(RowForm form) const {
  switch (form) {
    case RowForm::kDpRows: return my_dp_rows();
    case RowForm::kAttnTpSlice: return my_slice_rows();
    case RowForm::kFfnRows: return FfnRows();
    case RowForm::kCpRows: return cp_map_ != nullptr ? cp_map_->RowsOf(topology_.cp_rank()) : my_dp_rows();
  }
  return 0;
}

ForwardBatch::ForwardBatch(uint64_t id, BatchVariant v, Topology topology, std::vector<int64_t> dp_rows)
    : microbatch_id(id), variant(v), rows(topology, std::move(dp_rows), v != BatchVariant::kUnpadded) {
  if (v == BatchVariant::kContextParallel) SEAM_CHECK_OK(SetSequenceRows({}));
}

absl::Status ForwardBatch::SetSequenceRows(std::vector<int64_t> rows_per_sequence) {
  const int64_t total = std::accumulate(rows_per_sequence.begin(), rows_per_sequence.end(), int64_t{0});
  if (!rows_per_sequence.empty() && total != rows.my_dp_rows()) {
    return absl::InvalidArgumentError(absl::StrCat("the sequences hold ", total, " rows; the DP group has ",
                                                   rows.my_dp_rows()));
  }
  sequence_rows = std::move(rows_per_sequence);
  if (variant != BatchVariant::kContextParallel) return absl::OkStatus();
  std::vector<int64_t> seqs = sequence_rows;
  if (seqs.empty()) seqs = {rows.my_dp_rows()};
  SEAM_ASSIGN_OR_RETURN(CpRowMap map, CpRowMap::Make(std::move(seqs), rows.topology().attn_cp));
  rows.set_cp_map(std::make_shared<const CpRowMap>(std::move(map)));
  return absl::OkStatus();
}
ForwardBatch::~ForwardBatch() = default;
ForwardBatch::ForwardBatch(ForwardBatch&&) noexcept = default;
ForwardBatch& ForwardBatch::operator=(ForwardBatch&&) noexcept = default;

absl::Status ValidateBatchRows(const Topology& topology, const std::vector<int64_t>& dp_rows) {
  if (static_cast<int>(dp_rows.size()) != topology.attn_dp) {
    return absl::InvalidArgumentError(absl::StrCat("batch gives ", dp_rows.size(),
                                                   " attention-DP row counts; the topology has attn_dp ",
                                                   topology.attn_dp));
  }
  for (size_t d = 0; d < dp_rows.size(); ++d) {
    if (dp_rows[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("attention-DP group ", d, " has ", dp_rows[d], " rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::boundary

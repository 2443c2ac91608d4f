// GatherMixerInput: the gather a non-gathering mixer's compute needs, done by
// the boundary so that the model issues no collective.
#include "absl/strings/str_cat.h"
#include "row_movement.h"
#include "seam/boundary/stream_ops.h"
#include "seam/comm/communicator.h"
#include "seam/core/status.h"

namespace seam::boundary {

absl::StatusOr<Tensor> GatherMixerInput(const Tensor& x, ForwardBatch& batch) {
  const int64_t dp_rows = batch.rows.RowsOf(RowForm::kDpRows);
  if (x.rows() == dp_rows && (batch.rows.topology().attn_tp() == 1 ||
                              batch.stream->residual_form() != RowForm::kAttnTpSlice)) {
    return x;
  }
  if (x.rows() != batch.rows.RowsOf(RowForm::kAttnTpSlice)) {
    return absl::InvalidArgumentError(absl::StrCat("a mixer's input has ", x.rows(), " rows; its DP rows are ",
                                                   dp_rows, " and its attention-TP slice ",
                                                   batch.rows.RowsOf(RowForm::kAttnTpSlice)));
  }
  return rows::GatherCounts(*batch.comms.attn_tp, x, batch.rows.AttnTpSliceCounts());
}

}  // namespace seam::boundary

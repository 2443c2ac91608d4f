// Row movement primitives over a Communicator: padded and variable-size
// gathers and reduce-scatters of token rows. Internal to boundary/; the
// paths decide which one runs, these only move bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/comm/communicator.h"
#include "seam/core/tensor.h"

namespace seam::boundary::rows {

// Copy of `t` with `rows` rows: t's rows first, zero rows after.
Tensor PadRows(const Tensor& t, int64_t rows);
// Sums `input` over the group in padded parts of `chunk` rows (input padded to
// size·chunk); returns this rank's first `keep` rows.
absl::StatusOr<Tensor> ReduceScatterPadded(comm::Communicator& c, const Tensor& input, int64_t chunk, int64_t keep);
// Sums `input` (Σ counts rows) and returns this rank's counts[rank] rows.
absl::StatusOr<Tensor> ReduceScatterCounts(comm::Communicator& c, const Tensor& input,
                                           const std::vector<int64_t>& counts);
// Gathers every rank's `input` padded to `chunk` rows: [size·chunk] rows, rank order.
absl::StatusOr<Tensor> GatherPadded(comm::Communicator& c, const Tensor& input, int64_t chunk);
// Gathers every rank's input of counts[r] rows: [Σ counts] rows, rank order.
absl::StatusOr<Tensor> GatherCounts(comm::Communicator& c, const Tensor& input, const std::vector<int64_t>& counts);

}  // namespace seam::boundary::rows

// Row movement of context-parallel batches over one CpRowMap: take this
// rank's rows, gather every rank's back into natural order, add the residual
// before a sum, and reduce-scatter onto CP rows. Internal to boundary/.
#pragma once

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/comm/communicator.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

// This rank's CP rows (local order) of a tensor on the natural DP rows.
absl::StatusOr<Tensor> TakeCpRows(const Tensor& natural, const BatchRows& rows);
// Every rank's CP rows gathered over `cp_group` into natural order.
absl::StatusOr<Tensor> GatherCpRows(const Tensor& x, const BatchRows& rows, comm::Communicator* cp_group);
// c (natural rows) += this rank's residual rows r at their natural places;
// every row's residual is added by exactly the CP rank that holds it.
absl::Status AddCpResidual(Tensor* c, const Tensor& r, const BatchRows& rows);
// Sums c (natural rows) over `group`, whose rank order is the CP rank order,
// and returns this rank's CP rows.
absl::StatusOr<Tensor> ReduceScatterCpRows(comm::Communicator& group, const Tensor& c, const BatchRows& rows);

}  // namespace seam::boundary

// Runs the steps of a bound path on one rank: the collectives, row moves,
// residual update and read they name. Internal to boundary/. The path has
// already been chosen; this code makes no decision of its own.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/plan.h"
#include "seam/boundary/residual_ops.h"

namespace seam::boundary {

struct StepContext {
  ForwardBatch* batch = nullptr;
  const StageComms* comms = nullptr;
  const ResidualReadout* read = nullptr;  // entry paths only
  const std::vector<std::shared_ptr<InputFusion>>* fusions = nullptr;
  // Final norm with skip_empty: on a rank with no rows the norm kernel is
  // skipped (collectives on the path still run).
  bool skip_empty_norm = false;
  // Tried before the built-in attention-TP gather onto DP rows (final read).
  const AttnTpGatherFn* attn_tp_gather = nullptr;
};

// The tensors a path works on: contribution c, residual r, compute input x.
struct PathWork {
  Tensor c;
  RowForm c_form = RowForm::kDpRows;
  SumGroup owed = SumGroup::kNone;
  std::shared_ptr<const ResidualUpdate> update = PlainAddUpdate();  // c's update of r
  Tensor r;
  RowForm r_form = RowForm::kDpRows;
  Tensor x;
  RowForm x_form = RowForm::kDpRows;
  bool wrote_residual = false;
};

absl::Status RunSteps(const std::vector<Step>& steps, const StepContext& ctx, PathWork* work);

// The communicator of `group` (never null for a group the topology has).
comm::Communicator& GroupComm(const StageComms& comms, CommGroup group);

}  // namespace seam::boundary

#include "seam/boundary/replicated_component.h"

#include "absl/strings/str_cat.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {

bool IsSumRankZero(const StageBoundary& stage, const ForwardBatch& batch) {
  const Topology& t = batch.rows.topology();
  const SumGroup sum = stage.declaration().owed_sum();
  return sum == SumGroup::kAttnTp ? t.attn_tp_rank() == 0 : sum == SumGroup::kNone || t.tp_rank == 0;
}

absl::StatusOr<Tensor> AddReplicatedOnSumRankZero(const Tensor& partial, const Tensor& replicated,
                                                  const StageBoundary& stage, const ForwardBatch& batch) {
  SEAM_RETURN_IF_ERROR(ExpectSameShape(partial, replicated, "stage output", "replicated component"));
  if (!IsSumRankZero(stage, batch)) return partial;
  Tensor out = partial.Clone();
  SEAM_RETURN_IF_ERROR(kernels::AddInPlace(out, replicated));
  return out;
}

absl::Status CheckModuleLeavesItsSum(const StageBoundary& stage, const std::string& module, bool reduce_results) {
  if (!reduce_results) return absl::OkStatus();
  return errors::ModuleReducesUnderBoundary(module, stage.declaration().ToString());
}

}  // namespace seam::boundary

// SyntheticStack's two-batch-overlap forward: the stack's stages as the
// operations of two microbatches, run by the operation-scheduled driver.
#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {

absl::StatusOr<Tensor> SyntheticStack::ForwardTwoBatch(ForwardBatch& batch, const Tensor& input,
                                                       const TwoBatchRun& run) const {
  std::vector<const Stage*> stages;
  for (const Layer& layer : layers_) {
    for (const Stage& st : layer.stages) stages.push_back(&st);
  }
  if (run.split_after < 0 || run.split_after > static_cast<int>(stages.size())) {
    return absl::InvalidArgumentError(absl::StrCat("split after ", run.split_after, " of ", stages.size(), " stages"));
  }
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  for (int i = 0; i < run.split_after; ++i) {
    SEAM_ASSIGN_OR_RETURN(h, RunStage(*stages[i], batch, h));
  }
  const StageBoundary* next =
      run.split_after < static_cast<int>(stages.size()) ? stages[run.split_after]->boundary.get() : nullptr;
  SEAM_ASSIGN_OR_RETURN(MicrobatchPair pair, SplitMicrobatches(h, batch, TwoBatchSplit{run.a_dp_rows}, next));
  const int layer_ops = static_cast<int>(stages.size()) - run.split_after;
  const int ops = layer_ops + (run.merge_streams ? 0 : 1);
  Tensor outputs[2];
  MicrobatchOp op = [&](int mb, int k, ForwardBatch& part, Hidden& value) -> absl::Status {
    if (k < layer_ops) {
      SEAM_ASSIGN_OR_RETURN(value, RunStage(*stages[run.split_after + k], part, value));
      return absl::OkStatus();
    }
    SEAM_ASSIGN_OR_RETURN(outputs[mb], FinalNorm(value, part, final_norm_, FinalOptions()));
    return absl::OkStatus();
  };
  SEAM_RETURN_IF_ERROR(RunOperationSchedule(MakeTboSchedule(run.order, ops), ops, pair, op));
  if (run.merge_streams) {
    SEAM_ASSIGN_OR_RETURN(h, MergeMicrobatches(pair, batch));
    return FinalNorm(h, batch, final_norm_, FinalOptions());
  }
  if (pair.a.stream != nullptr || pair.b.stream != nullptr) {
    return absl::InternalError("a microbatch still holds its stream after the final norm");
  }
  return MergeRows(outputs[0], outputs[1]);
}

}  // namespace seam::boundary::testing

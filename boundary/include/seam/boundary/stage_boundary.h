// StageBoundary: the model-facing object of one stage. Its forward protocol
// is prepare → compute → finish: Prepare completes what the stream owes,
// updates and reads the residual and moves rows to where compute runs;
// Finish registers or completes the sum the compute output owes and returns
// the value to pass to the next boundary. Created by AppendStages; usable
// for forwards once its layer stack has bound it. One thread per boundary.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "seam/boundary/capture.h"
#include "seam/boundary/declaration.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/plan.h"
#include "seam/boundary/residual_ops.h"
#include "seam/boundary/residual_stream.h"

namespace seam::boundary {

class ExitScope;
class DeferredFinalize;

class StageBoundary {
 public:
  // `read` null: the plain add + RMSNorm over `norm`.
  StageBoundary(StageDeclaration declaration, const NormParams* norm, StageOptions options,
                std::shared_ptr<const ResidualReadout> read = nullptr);
  ~StageBoundary();

  // The declaration; once bound it carries its place in the stack.
  const StageDeclaration& declaration() const { return declaration_; }
  bool bound() const { return plan_ != nullptr; }
  const StagePlan& plan() const;  // requires bound()

  // Input of this stage's compute for the value the previous call returned;
  // with `capture`, also hands the captures capture.h describes (attention only).
  absl::StatusOr<Tensor> Prepare(const Hidden& hidden, ForwardBatch& batch, const PrepareCapture& capture = {});
  // Registers or completes the sum `output` owes; returns the value for the next call.
  // An FFN of an operation-scheduled batch refuses it (and Exit): FAILED_PRECONDITION.
  absl::StatusOr<Hidden> Finish(const Tensor& output, ForwardBatch& batch);
  // FFN with fusions: opens the exit before compute (the decision is made once
  // and published to compute), finished by the scope's Finish().
  absl::StatusOr<std::unique_ptr<ExitScope>> Exit(ForwardBatch& batch);
  // The operation-scheduled path (two-batch overlap): the stage's compute ran
  // without an exit scope and returns its partial output; this completes the
  // sum it owes now (never deferred, never left to the next input, never a
  // finalize handoff), applies its output transform (output_transform.h),
  // moves it back to the layer's exit rows (the residual's: under attention
  // DP a plain scatter, a local narrow of this DP group's rows) and leaves
  // nothing owed: only the plain residual update pending, or the stream
  // written where the update is applied at the exit. Allowed in any batch.
  // FAILED_PRECONDITION for a stage with no completing exit (an
  // always-partial attention).
  absl::StatusOr<Hidden> CompleteNow(const Tensor& output, ForwardBatch& batch);

  // Called by the layer stack.
  void Bind(std::unique_ptr<StagePlan> plan, StagePlace place);
  bool has_fusions() const { return options_.fusions != nullptr; }

 private:
  friend class ExitScope;
  absl::StatusOr<const VariantPaths*> Paths(const ForwardBatch& batch) const;
  absl::StatusOr<const ExitOption*> ChooseExit(const ForwardBatch& batch) const;
  absl::StatusOr<Hidden> RunExit(const ExitOption& option, const Tensor& output, ForwardBatch& batch);

  StageDeclaration declaration_;
  const NormParams* norm_;
  StageOptions options_;
  std::shared_ptr<const ResidualReadout> read_;
  std::unique_ptr<StagePlan> plan_;
  std::vector<std::shared_ptr<InputFusion>> fusions_;
};

// The exit of an FFN whose boundary has fusions. The exit choice is made when
// the scope opens; defer_moe_finalize() is the only flag compute may read.
// Destruction restores the batch's previous flag even if compute failed.
class ExitScope {
 public:
  ~ExitScope();
  bool defer_moe_finalize() const { return defer_moe_finalize_; }
  // Completes or carries the output's sum; once.
  absl::StatusOr<Hidden> Finish(const Tensor& output);
  // Hands the MoE finalize to the final norm instead (once, instead of
  // Finish). FAILED_PRECONDITION when defer_moe_finalize() is false.
  absl::StatusOr<Hidden> FinishDeferred(std::shared_ptr<const DeferredFinalize> handoff);

 private:
  friend class StageBoundary;
  ExitScope(StageBoundary* boundary, ForwardBatch* batch, const ExitOption* option, bool defer);
  StageBoundary* boundary_;
  ForwardBatch* batch_;
  const ExitOption* option_;
  bool defer_moe_finalize_;
  bool previous_flag_;
  const ExitOption* handoff_option_ = nullptr;
  bool finished_ = false;
};

}  // namespace seam::boundary

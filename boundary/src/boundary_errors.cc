#include "seam/boundary/boundary_errors.h"

#include "absl/strings/str_cat.h"

namespace seam::boundary::errors {

absl::Status StreamNotStarted() {
  return absl::FailedPreconditionError("start the layer stack before entering a stage");
}

absl::Status NotThisStreamsOutput(uint64_t microbatch_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "output does not belong to this residual stream; change layer outputs through boundary accessors "
      "(stream of microbatch ",
      microbatch_id, ")"));
}

absl::Status TakeOutputWithPendingUpdate() {
  return absl::FailedPreconditionError("write the residual update before taking the final output");
}

absl::Status NoPathForVariant(const char* variant_name) {
  return absl::UnimplementedError(absl::StrCat("no stage boundary path for the active ", variant_name, " batch"));
}

absl::Status AppendWithoutStack() {
  return absl::FailedPreconditionError(
      "append_stages needs an open layer stack; open a LayerStack around the layers' construction");
}

absl::Status SnapshotNeedsPlainUpdate(const std::string& update_name) {
  return absl::FailedPreconditionError(
      absl::StrCat("snapshot requires a plain residual update (the pending update is ", update_name, ")"));
}

absl::Status OwedOutputUsedAsTensor() {
  return absl::FailedPreconditionError(
      "this output still owes a sum and cannot be used as a tensor; pass it to the next boundary");
}

absl::Status DeclarationAlreadyBound(const std::string& where) {
  return absl::InvalidArgumentError(absl::StrCat("declaration already has its place in a layer stack (", where,
                                                 "); pass a fresh DeclareAttn() or DeclareFfn()"));
}

absl::Status FinishWithFusions() {
  return absl::FailedPreconditionError(
      "this ffn stage has fusions: run its compute under Exit() and call the scope's Finish() once");
}

absl::Status HandoffWithoutDefer() {
  return absl::FailedPreconditionError(
      "a finalize handoff was returned while defer_moe_finalize is false; finish with the finalized output");
}

absl::Status SnapshotOfFinalizeHandoff() {
  return absl::FailedPreconditionError(
      "snapshot of a deferred MoE finalize: producer-specific handoffs need an explicit capture adapter");
}

absl::Status CaptureWithFinalizeHandoff() {
  return absl::FailedPreconditionError(
      "final_norm with finalize_norm cannot capture a finalize handoff; drop finalize_norm to capture");
}

absl::Status FfnPrepareTakesNoCapture() {
  return absl::InvalidArgumentError(
      "ffn prepare does not take a capture; capture at an attention's prepare or at the final norm");
}

absl::Status PreparedBranchEnteredThroughPrepare() {
  return absl::FailedPreconditionError("a prepared branch must enter through branch_input, not prepare");
}

absl::Status BranchVariantRefused(const char* variant_name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "branch transport supports ordinary token rows only; a branch cannot serve ", variant_name, " batches"));
}

absl::Status ModuleReducesUnderBoundary(const std::string& module, const std::string& stage) {
  return absl::InvalidArgumentError(absl::StrCat(
      module, " is built with reduce_results=true under a ", stage,
      " boundary; build it with reduce_results=false and leave the sum to the boundary"));
}

absl::Status PipelinePieceWithoutStageFacts(int first_layer, int end_layer, int total_layers) {
  return absl::InvalidArgumentError(absl::StrCat(
      "a pipeline piece (layers [", first_layer, ", ", end_layer, ") of ", total_layers,
      ") needs stage_facts: its neighbouring stages live on other ranks"));
}

}  // namespace seam::boundary::errors

// The boundary's user-facing errors, one function each so that code and
// tests share the exact wording. Codes follow what the caller must do:
// FAILED_PRECONDITION for a call made in the wrong state, INVALID_ARGUMENT
// for a bad declaration or option, UNIMPLEMENTED for a batch variant no
// stage path serves.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace seam::boundary::errors {

absl::Status StreamNotStarted();                          // entering a stage before Start()
absl::Status NotThisStreamsOutput(uint64_t microbatch_id);  // identity mismatch
absl::Status TakeOutputWithPendingUpdate();               // TakeOutput on a pending stream
absl::Status NoPathForVariant(const char* variant_name);  // unserved batch variant
absl::Status AppendWithoutStack();                        // AppendStages outside a stack
absl::Status SnapshotNeedsPlainUpdate(const std::string& update_name);
absl::Status OwedOutputUsedAsTensor();                    // tensor() on an owed handle
absl::Status DeclarationAlreadyBound(const std::string& where);
absl::Status FinishWithFusions();                         // finish() on a stage that must use Exit()
absl::Status HandoffWithoutDefer();                       // a finalize handoff while defer_moe_finalize is false
absl::Status SnapshotOfFinalizeHandoff();                 // snapshot() on a deferred MoE finalize
absl::Status CaptureWithFinalizeHandoff();                // final_norm(capture, finalize_norm) on a handoff
absl::Status FfnPrepareTakesNoCapture();                  // prepare(capture) on an ffn stage
absl::Status PreparedBranchEnteredThroughPrepare();       // prepare() on a prepared_from stage
absl::Status BranchVariantRefused(const char* variant_name);  // a branch built for CP / input-scattered / SP
// A module under a stage boundary built to reduce its own results.
absl::Status ModuleReducesUnderBoundary(const std::string& module, const std::string& stage);
// A layer stack that holds only part of the layers without a stage-facts function.
absl::Status PipelinePieceWithoutStageFacts(int first_layer, int end_layer, int total_layers);

}  // namespace seam::boundary::errors

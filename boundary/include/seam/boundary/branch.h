// Prepared branches: a side path of stages that starts from the input a
// source stage has already prepared (LongCat's dense FFN, attention and
// dense FFN beside its MoE) and that the model merges back explicitly.
// A branch neither extends the layer stack nor waits for a consumer: its
// stages bind at once (the last one as the branch's end) and the next
// append still follows the source. Its first stage is entered through
// BranchInput, never Prepare (its norm is never applied: the source's read
// already ran), which moves the source's input to the stage's rows and
// forks the residual stream into the branch's own batch. BranchOutput
// completes the sum the branch's last output owes on the branch's exit
// rows; MergeBranch adds it to the source's output and hands the branch's
// residual back to the main stream. Branch transport serves ordinary token
// rows only (ORDINARY and UNPADDED batches, all-reduce completions); plain
// updates only.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/residual_stream.h"
#include "seam/boundary/stage_boundary.h"

namespace seam::boundary {

struct BranchOptions {
  // Batch variants the branch must serve; CP, input-scattered and sequence
  // parallel are refused at construction.
  std::vector<BatchVariant> variants = {BatchVariant::kOrdinary, BatchVariant::kUnpadded};
};

// Appends a branch prepared from `source` (a stage of the current stack) and
// returns its boundaries, bound. INVALID_ARGUMENT for a refused variant or an
// empty branch; FAILED_PRECONDITION outside an open stack.
absl::StatusOr<std::vector<std::shared_ptr<StageBoundary>>> AppendBranchAt(const char* file, int line,
                                                                           int global_layer,
                                                                           const StageBoundary& source,
                                                                           std::vector<StageItem> items,
                                                                           BranchOptions options = {});
#define SEAM_APPEND_BRANCH(global_layer, source, ...) \
  ::seam::boundary::AppendBranchAt(__FILE__, __LINE__, (global_layer), (source), {__VA_ARGS__})

struct BranchFork {
  ForwardBatch batch;  // the branch's own batch and stream (written: the forked residual)
  Tensor input;        // the first branch stage's compute input
};
// Enters `first` (a branch's first stage) with `source_input`, the input the
// source's Prepare returned on this rank, in `batch` (the main batch).
absl::StatusOr<BranchFork> BranchInput(const StageBoundary& first, const Tensor& source_input, ForwardBatch& batch);

struct BranchResult {
  Tensor residual;      // the branch's residual, on `rows`
  Tensor contribution;  // its last output, summed, on `rows`
  RowForm rows = RowForm::kDpRows;
};
// Completes the branch's last output; releases the branch's stream.
absl::StatusOr<BranchResult> BranchOutput(const Hidden& hidden, ForwardBatch& branch_batch);

// Combines `branch` with the source's pending output in `batch`: the main
// stream takes the branch's residual, and its pending contribution becomes
// the source's completed output plus the branch's. Returns the value to pass on.
absl::StatusOr<Hidden> MergeBranch(const Hidden& hidden, ForwardBatch& batch, const BranchResult& branch);

}  // namespace seam::boundary

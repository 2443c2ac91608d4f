// Components outside the sum: a part of a stage's output that every rank of
// the group completing its sum computes in full (a shared expert replicated
// with TP 1, LoRA-B applied to a partial sum) is added on the group's rank 0
// only, so the one sum counts it once. And the loading check that keeps a
// module under a stage boundary from reducing its own results: compute never
// sums a stage's output, the boundary does.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

// Whether this rank is rank 0 of the group completing `stage`'s sum (every
// rank where the stage owes none): the one rank that counts a component
// every rank of the group computes in full. Known without a collective.
bool IsSumRankZero(const StageBoundary& stage, const ForwardBatch& batch);

// partial (this rank's share of `stage`'s output) + replicated on rank 0 of
// the group completing the stage's sum; partial unchanged elsewhere (and
// everywhere when the sum is over one rank... then rank 0 is this rank).
// INVALID_ARGUMENT when the shapes differ.
absl::StatusOr<Tensor> AddReplicatedOnSumRankZero(const Tensor& partial, const Tensor& replicated,
                                                  const StageBoundary& stage, const ForwardBatch& batch);

// INVALID_ARGUMENT when a module loaded under `stage` is built to reduce its
// own results (reduce_results = true): its sum would be counted twice.
absl::Status CheckModuleLeavesItsSum(const StageBoundary& stage, const std::string& module, bool reduce_results);

}  // namespace seam::boundary

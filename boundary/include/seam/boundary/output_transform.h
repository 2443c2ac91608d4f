// OutputTransform: processing a producer declares for its contribution
// before the residual update (a per-row gate or scale computed from the
// completed output). It travels inside the producer's update
// (TransformedUpdate), so every path that applies the update applies the
// transform first, exactly once, to the completed contribution: entries
// (update_and_read), Fold, ToPp, applied_at_exit exits. The wrapped update is
// not a plain add, so the transform never moves before a sum or into a
// fusion; an implementation whose order needs it before a reduce-scatter is
// not served. Transforms are immutable and shared by every rank thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "seam/boundary/residual_ops.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

class OutputTransform {
 public:
  virtual ~OutputTransform() = default;
  virtual std::string name() const = 0;
  // contribution ← transform(contribution), in place; it owes no sum and is
  // on the residual's rows.
  virtual absl::Status Apply(const Tensor& contribution) const = 0;
};

// `update` with `transform` applied to (a copy of) the contribution first.
// Caps: not a plain add; applied_at_exit as `update`'s. Name "<transform>+<update>".
std::shared_ptr<const ResidualUpdate> TransformedUpdate(std::shared_ptr<const ResidualUpdate> update,
                                                        std::shared_ptr<const OutputTransform> transform);

// The parts of an update TransformedUpdate made: its transform and the
// update it wraps; {nullptr, `update`} for any other update. CompleteNow uses
// it to apply the transform to the completed output.
struct TransformParts {
  std::shared_ptr<const OutputTransform> transform;
  std::shared_ptr<const ResidualUpdate> update;
};
TransformParts UnwrapTransform(const std::shared_ptr<const ResidualUpdate>& update);

}  // namespace seam::boundary

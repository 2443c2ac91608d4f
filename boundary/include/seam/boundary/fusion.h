// Fusion providers: backend-specific ways to complete a sum together with the
// residual add and norm at a consumer's input. Candidates are tried in order
// before the built-in all-reduce + add + norm; a candidate that declines must
// do so before touching any input or starting any collective, so that the
// fallback stays valid.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/residual_ops.h"
#include "seam/core/tensor.h"

namespace seam::comm {
class Communicator;
}

namespace seam::boundary {

struct StagePlan;

// A stage's own gather over attention TP: `slice` (this rank's rows) onto
// `out` (its DP group's rows). Returns false to decline before touching anything.
using AttnTpGatherFn = std::function<absl::StatusOr<bool>(const Tensor& slice, const BatchRows& rows,
                                                          comm::Communicator& attn_tp, const Tensor& out)>;

class InputFusion {
 public:
  virtual ~InputFusion() = default;
  virtual std::string name() const = 0;
  // The sum group this candidate completes (with residual add and norm).
  virtual SumGroup completes() const = 0;
  // Completes: residual ← residual + Σ_group contribution; out ← norm(residual sum).
  // Returns false to decline (nothing touched), true when done.
  virtual absl::StatusOr<bool> TryCompleteAddNorm(const Tensor& contribution, const Tensor& residual,
                                                  const NormParams& norm, const Tensor& out,
                                                  comm::Communicator& group) = 0;
};

class FusionProvider {
 public:
  virtual ~FusionProvider() = default;
  // Ordered consumer candidates for an attention or FFN stage's input.
  virtual std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan& plan) const = 0;
  // Separate candidates for an attention's and an FFN's input (default: the
  // same InputFusions). Within one sum group they are tried in the order given.
  virtual std::vector<std::shared_ptr<InputFusion>> AttnInputFusions(const StagePlan& plan) const {
    return InputFusions(plan);
  }
  virtual std::vector<std::shared_ptr<InputFusion>> FfnInputFusions(const StagePlan& plan) const {
    return InputFusions(plan);
  }
  // Whether the terminal MoE exit of `plan` may hand its finalize to the
  // final norm for this batch (default: no). Asked on every exit with fusions.
  virtual bool CanDeferFinalize(const StagePlan& plan, const ForwardBatch& batch) const { return false; }
  // Whether an FFN declared defers_only_with_provider may leave its TP
  // all-reduce to the next input for this batch (default: no).
  virtual bool CanDeferAllReduce(const StagePlan& plan, const ForwardBatch& batch) const { return false; }
};

}  // namespace seam::boundary

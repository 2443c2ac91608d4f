// DeferredFinalize: a MoE's finalize (the scaled combine of each token's
// expert outputs) that the terminal FFN exit hands to the final norm instead
// of running it, when its fusion provider accepts the batch. The producer
// owns the handle's data and gives its own unfused completion; the final
// norm either runs a FinalizeNormService (finalize + sum + residual add +
// norm fused) or completes the handle unfused first. The handle is
// immutable and shared; it lives in the residual stream until consumed.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/residual_ops.h"
#include "seam/core/tensor.h"

namespace seam::comm {
class Communicator;
}

namespace seam::boundary {

class DeferredFinalize {
 public:
  // expert_outputs [rows, K, H] (this rank's partials on the FFN's rows),
  // scales f32 [rows, K] (alike on every rank); `complete` is the producer's
  // unfused finalize, returning this rank's partial output [rows, H].
  DeferredFinalize(Tensor expert_outputs, Tensor scales, std::function<absl::StatusOr<Tensor>()> complete);
  const Tensor& expert_outputs() const { return expert_outputs_; }
  const Tensor& scales() const { return scales_; }
  int64_t rows() const { return expert_outputs_.defined() ? expert_outputs_.dim(0) : 0; }
  // The producer's unfused finalize (the output still owes its sum).
  absl::StatusOr<Tensor> Complete() const { return complete_(); }

 private:
  Tensor expert_outputs_, scales_;
  std::function<absl::StatusOr<Tensor>()> complete_;
};

// Runs a handoff's finalize, its sum over the MoE output group, the residual
// add and the norm as one operation.
class FinalizeNormService {
 public:
  virtual ~FinalizeNormService() = default;
  virtual std::string name() const = 0;
  // residual (rows [row_offset, row_offset + residual.rows()) of the handoff's
  // rows) ← residual + Σ_group finalize(handoff); out ← norm of the fp32 sum.
  // `plan` is the plan of the stage that handed the finalize over.
  virtual absl::Status Finalize(const DeferredFinalize& handoff, int64_t row_offset, const Tensor& residual,
                                const NormParams& norm, const Tensor& out, comm::Communicator& group,
                                const StagePlan& plan) = 0;
};

// The built-in service. On a group of one rank: kernels::MoeFinalizeAddRmsNorm
// on this rank's rows (finalize, add and norm in one kernel). On more ranks
// it moves no more than the exit it replaces (a handoff is taken only where
// that exit all-reduces, StageBoundary::Exit): the producer's own finalize
// runs first, so the one all-reduce carries [rows, H] and not the [rows, K,
// H] expert outputs; then the sum, the add and the norm run through the
// first of `fusions`' FFN input candidates for the MoE output group that
// takes them (the IPC all-reduce + add + norm kernel), else as the
// group's all-reduce and kernels::FusedAddRmsNorm. Either way bit for bit
// the undeferred path (null fusions: none).
std::shared_ptr<FinalizeNormService> MakeFinalizeNormService(std::shared_ptr<FusionProvider> fusions = nullptr);

// The provider of a model whose last MoE hands its finalize to the final
// norm: CanDeferFinalize accepts every batch at a terminal sparse FFN that
// does not complete its own sum; every other question (input candidates,
// CanDeferAllReduce) goes to `inner` (null: none, never).
std::shared_ptr<FusionProvider> TerminalFinalizeProvider(std::shared_ptr<FusionProvider> inner);

}  // namespace seam::boundary

// Small fixtures for the boundary's behaviour tests: one attention → FFN
// layer bound in its own layer stack, linear "compute" whose partial outputs
// sum exactly, and self communicators for single-rank runs.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/boundary/stream_ops.h"
#include "seam/comm/communicator.h"
#include "grid_case.h"

namespace seam::boundary::testing {

// Weight 1, eps 1/1024, over synthetic_stack's kHidden features.
NormParams UnitNorm();

// One layer (attention, then FFN) bound in a stack of its own; terminal.
struct OneLayer {
  NormParams attn_norm = UnitNorm();
  NormParams ffn_norm = UnitNorm();
  NormParams final_norm = UnitNorm();
  std::shared_ptr<StageBoundary> attn, ffn;
};
struct OneLayerOptions {
  ReductionPolicy policy = ReductionPolicy::kAr;
  StageDeclaration attn = DeclareAttn();
  StageOptions attn_options;
  StageOptions ffn_options;
};
absl::StatusOr<std::unique_ptr<OneLayer>> BuildOneLayer(const Topology& topology, OneLayerOptions options = {});

// This rank's share of a linear stage output: y = x / (2 · group_size), so the
// completed sum over a group of that size is exactly x / 2.
Tensor PartialOutput(const Tensor& x, int group_size);

// A tensor of `rows` dyadic rows (seeded).
Tensor Rows(uint64_t seed, int64_t rows);

// Hooks of RunLayer: the attention's compute (default: PartialOutput over
// attention TP) and what the model does with the attention's returned value
// before the FFN prepares it (default: nothing).
struct LayerHooks {
  std::function<Tensor(const Tensor& x)> attn_compute;
  std::function<absl::StatusOr<Hidden>(Hidden h, ForwardBatch& batch)> after_attn;
};
// Start → attention → FFN (PartialOutput over TP) → FinalNorm on `input`.
absl::StatusOr<Tensor> RunLayer(const OneLayer& layer, ForwardBatch& batch, const Tensor& input,
                                const LayerHooks& hooks = {});
// The same layer on one rank over all rows of `input`.
absl::StatusOr<Tensor> RunSingleRank(const Tensor& input, const LayerHooks& hooks = {});

// Self communicators for a single-rank batch (kept alive by the holder).
class SelfComms {
 public:
  SelfComms();
  ~SelfComms();
  StageComms comms() const;

 private:
  std::unique_ptr<comm::Communicator> self_;
};

}  // namespace seam::boundary::testing

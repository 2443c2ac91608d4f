#include "stage_fixture.h"

#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {

NormParams UnitNorm() {
  NormParams n;
  n.weight = Tensor::FromFloats(std::vector<float>(kHidden, 1.0f), {kHidden});
  n.eps = 1.0f / 1024;
  return n;
}

absl::StatusOr<std::unique_ptr<OneLayer>> BuildOneLayer(const Topology& topology, OneLayerOptions options) {
  auto layer = std::make_unique<OneLayer>();
  LayerStack stack(LayerStackOptions{topology, options.policy});
  SEAM_ASSIGN_OR_RETURN(
      auto boundaries,
      SEAM_APPEND_STAGES(0, StageItem{options.attn, &layer->attn_norm, options.attn_options},
                         StageItem{DeclareFfn(), &layer->ffn_norm, options.ffn_options}));
  SEAM_RETURN_IF_ERROR(stack.Close());
  layer->attn = boundaries[0];
  layer->ffn = boundaries[1];
  return layer;
}

Tensor PartialOutput(const Tensor& x, int group_size) {
  std::vector<float> v = x.ToFloats();
  for (float& f : v) f = f / static_cast<float>(2 * group_size);
  return Tensor::FromFloats(v, x.shape());
}

Tensor Rows(uint64_t seed, int64_t rows) { return StackInput(seed, rows); }

absl::StatusOr<Tensor> RunLayer(const OneLayer& layer, ForwardBatch& batch, const Tensor& input,
                                const LayerHooks& hooks) {
  const Topology& t = batch.rows.topology();
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn->Prepare(h, batch));
  const Tensor attn_out = hooks.attn_compute ? hooks.attn_compute(x) : PartialOutput(x, t.attn_tp());
  SEAM_ASSIGN_OR_RETURN(h, layer.attn->Finish(attn_out, batch));
  if (hooks.after_attn) {
    SEAM_ASSIGN_OR_RETURN(h, hooks.after_attn(h, batch));
  }
  SEAM_ASSIGN_OR_RETURN(x, layer.ffn->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(h, layer.ffn->Finish(PartialOutput(x, t.tp), batch));
  return FinalNorm(h, batch, layer.final_norm);
}

absl::StatusOr<Tensor> RunSingleRank(const Tensor& input, const LayerHooks& hooks) {
  SEAM_ASSIGN_OR_RETURN(Topology t, Topology::Make(1, 1, 0));
  SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t));
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {input.rows()});
  batch.comms = self.comms();
  return RunLayer(*layer, batch, input, hooks);
}

SelfComms::SelfComms() : self_(comm::MakeSelfCommunicator("tp")) {}
SelfComms::~SelfComms() = default;
StageComms SelfComms::comms() const { return StageComms{self_.get(), self_.get(), self_.get(), self_.get()}; }

}  // namespace seam::boundary::testing

#include "seam/boundary/deferred_finalize.h"

#include "seam/boundary/plan.h"
#include "seam/comm/communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {

DeferredFinalize::DeferredFinalize(Tensor expert_outputs, Tensor scales,
                                   std::function<absl::StatusOr<Tensor>()> complete)
    : expert_outputs_(std::move(expert_outputs)), scales_(std::move(scales)), complete_(std::move(complete)) {}

namespace {

class BuiltInFinalizeNorm final : public FinalizeNormService {
 public:
  std::string name() const override { return "moe_finalize_add_rmsnorm"; }
  absl::Status Finalize(const DeferredFinalize& handoff, int64_t row_offset, const Tensor& residual,
                        const NormParams& norm, const Tensor& out, comm::Communicator& group) override {
    Tensor summed = handoff.expert_outputs().Clone();
    if (group.size() > 1) SEAM_RETURN_IF_ERROR(group.AllReduce(summed));
    const int64_t rows = residual.rows();
    const Tensor mine = summed.Rows(row_offset, rows);
    const Tensor scales = handoff.scales().Rows(row_offset, rows);
    return kernels::MoeFinalizeAddRmsNorm(mine, scales.is_contiguous() ? scales : scales.Clone(), residual,
                                          norm.weight, norm.eps, out);
  }
};

class TerminalFinalize final : public FusionProvider {
 public:
  explicit TerminalFinalize(std::shared_ptr<FusionProvider> inner) : inner_(std::move(inner)) {}
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan& plan) const override {
    return inner_ ? inner_->InputFusions(plan) : std::vector<std::shared_ptr<InputFusion>>{};
  }
  std::vector<std::shared_ptr<InputFusion>> AttnInputFusions(const StagePlan& plan) const override {
    return inner_ ? inner_->AttnInputFusions(plan) : std::vector<std::shared_ptr<InputFusion>>{};
  }
  std::vector<std::shared_ptr<InputFusion>> FfnInputFusions(const StagePlan& plan) const override {
    return inner_ ? inner_->FfnInputFusions(plan) : std::vector<std::shared_ptr<InputFusion>>{};
  }
  bool CanDeferFinalize(const StagePlan& plan, const ForwardBatch& batch) const override {
    const StageDeclaration& d = plan.declaration;
    return d.kind == StageKind::kFfn && d.sparse && !d.output_complete && d.place.terminal;
  }
  bool CanDeferAllReduce(const StagePlan& plan, const ForwardBatch& batch) const override {
    return inner_ != nullptr && inner_->CanDeferAllReduce(plan, batch);
  }

 private:
  std::shared_ptr<FusionProvider> inner_;
};

}  // namespace

std::shared_ptr<FusionProvider> TerminalFinalizeProvider(std::shared_ptr<FusionProvider> inner) {
  return std::make_shared<TerminalFinalize>(std::move(inner));
}

std::shared_ptr<FinalizeNormService> MakeFinalizeNormService() { return std::make_shared<BuiltInFinalizeNorm>(); }

}  // namespace seam::boundary

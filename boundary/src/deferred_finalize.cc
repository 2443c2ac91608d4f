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
  explicit BuiltInFinalizeNorm(std::shared_ptr<FusionProvider> fusions) : fusions_(std::move(fusions)) {}
  std::string name() const override { return "moe_finalize_add_rmsnorm"; }
  absl::Status Finalize(const DeferredFinalize& handoff, int64_t row_offset, const Tensor& residual,
                        const NormParams& norm, const Tensor& out, comm::Communicator& group,
                        const StagePlan& plan) override {
    const int64_t rows = residual.rows();
    if (group.size() == 1) {
      const Tensor mine = handoff.expert_outputs().Rows(row_offset, rows);
      const Tensor scales = handoff.scales().Rows(row_offset, rows);
      return kernels::MoeFinalizeAddRmsNorm(mine, scales.is_contiguous() ? scales : scales.Clone(), residual,
                                            norm.weight, norm.eps, out);
    }
    // The producer's finalize first: the sum then carries what the plain exit's would.
    SEAM_ASSIGN_OR_RETURN(Tensor partial, handoff.Complete());
    if (!partial.is_contiguous()) partial = partial.Clone();
    if (fusions_ != nullptr && row_offset == 0 && partial.rows() == rows) {
      const CommGroup completing = GroupCompleting(SumGroup::kMoeOutput);
      for (const auto& candidate : fusions_->FfnInputFusions(plan)) {
        if (GroupCompleting(candidate->completes()) != completing) continue;
        SEAM_ASSIGN_OR_RETURN(bool done, candidate->TryCompleteAddNorm(partial, residual, norm, out, group));
        if (done) return absl::OkStatus();
      }
    }
    SEAM_RETURN_IF_ERROR(group.AllReduce(partial));
    return kernels::FusedAddRmsNorm(partial.Rows(row_offset, rows), residual, norm.weight, norm.eps, out);
  }

 private:
  std::shared_ptr<FusionProvider> fusions_;
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

std::shared_ptr<FinalizeNormService> MakeFinalizeNormService(std::shared_ptr<FusionProvider> fusions) {
  return std::make_shared<BuiltInFinalizeNorm>(std::move(fusions));
}

}  // namespace seam::boundary

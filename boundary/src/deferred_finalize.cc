#include "seam/boundary/deferred_finalize.h"

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

}  // namespace

std::shared_ptr<FinalizeNormService> MakeFinalizeNormService() { return std::make_shared<BuiltInFinalizeNorm>(); }

}  // namespace seam::boundary

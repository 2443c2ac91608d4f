#include "seam/boundary/residual_ops.h"

#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {

namespace {
class PlainAdd final : public ResidualUpdate {
 public:
  UpdateCaps caps() const override { return UpdateCaps{}; }
  std::string name() const override { return "plain_add"; }
  absl::Status Apply(const Tensor& contribution, const Tensor& residual) const override {
    return kernels::AddInPlace(residual, contribution);
  }
};
}  // namespace

std::shared_ptr<const ResidualUpdate> PlainAddUpdate() {
  static const auto* update = new std::shared_ptr<const ResidualUpdate>(std::make_shared<PlainAdd>());
  return *update;
}

absl::Status ResidualReadout::UpdateAndRead(const ResidualUpdate& update, const Tensor& contribution,
                                            const Tensor& residual, const Tensor& out) const {
  SEAM_RETURN_IF_ERROR(update.Apply(contribution, residual));
  return Read(residual, out);
}

absl::Status AddRmsNormRead::UpdateAndRead(const ResidualUpdate& update, const Tensor& contribution,
                                           const Tensor& residual, const Tensor& out) const {
  SEAM_CHECK_MSG(norm_ != nullptr, "add+norm read without norm parameters");
  if (!update.caps().plain_add) return ResidualReadout::UpdateAndRead(update, contribution, residual, out);
  return kernels::FusedAddRmsNorm(contribution, residual, norm_->weight, norm_->eps, out);
}

absl::Status AddRmsNormRead::Read(const Tensor& residual, const Tensor& out) const {
  SEAM_CHECK_MSG(norm_ != nullptr, "add+norm read without norm parameters");
  return kernels::RmsNorm(residual, norm_->weight, norm_->eps, out);
}

}  // namespace seam::boundary

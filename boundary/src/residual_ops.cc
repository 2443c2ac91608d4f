#include "seam/boundary/residual_ops.h"

#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {

namespace {
class PlainAdd final : public ResidualUpdate {
 public:
  UpdateCaps caps() const override { return UpdateCaps{}; }
  std::string name() const override { return "plain_add"; }
};
}  // namespace

std::shared_ptr<const ResidualUpdate> PlainAddUpdate() {
  static const auto* update = new std::shared_ptr<const ResidualUpdate>(std::make_shared<PlainAdd>());
  return *update;
}

absl::Status AddRmsNormRead::UpdateAndRead(const Tensor& contribution, const Tensor& residual,
                                           const Tensor& out) const {
  SEAM_CHECK_MSG(norm_ != nullptr, "add+norm read without norm parameters");
  return kernels::FusedAddRmsNorm(contribution, residual, norm_->weight, norm_->eps, out);
}

absl::Status AddRmsNormRead::Read(const Tensor& residual, const Tensor& out) const {
  SEAM_CHECK_MSG(norm_ != nullptr, "add+norm read without norm parameters");
  return kernels::RmsNorm(residual, norm_->weight, norm_->eps, out);
}

}  // namespace seam::boundary

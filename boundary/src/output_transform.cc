#include "seam/boundary/output_transform.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::boundary {
namespace {

class Transformed final : public ResidualUpdate {
 public:
  Transformed(std::shared_ptr<const ResidualUpdate> update, std::shared_ptr<const OutputTransform> transform)
      : update_(std::move(update)), transform_(std::move(transform)) {}
  const std::shared_ptr<const ResidualUpdate>& update() const { return update_; }
  const std::shared_ptr<const OutputTransform>& transform() const { return transform_; }
  UpdateCaps caps() const override { return UpdateCaps{/*plain_add=*/false, update_->caps().applied_at_exit}; }
  std::string name() const override { return absl::StrCat(transform_->name(), "+", update_->name()); }
  absl::Status Apply(const Tensor& contribution, const Tensor& residual) const override {
    // The contribution may be a view the stream still holds: transform a copy.
    const Tensor transformed = contribution.Clone();
    SEAM_RETURN_IF_ERROR(transform_->Apply(transformed));
    return update_->Apply(transformed, residual);
  }

 private:
  std::shared_ptr<const ResidualUpdate> update_;
  std::shared_ptr<const OutputTransform> transform_;
};

}  // namespace

std::shared_ptr<const ResidualUpdate> TransformedUpdate(std::shared_ptr<const ResidualUpdate> update,
                                                        std::shared_ptr<const OutputTransform> transform) {
  SEAM_CHECK_MSG(update != nullptr && transform != nullptr, "TransformedUpdate needs an update and a transform");
  return std::make_shared<Transformed>(std::move(update), std::move(transform));
}

TransformParts UnwrapTransform(const std::shared_ptr<const ResidualUpdate>& update) {
  if (const auto* t = dynamic_cast<const Transformed*>(update.get())) return {t->transform(), t->update()};
  return {nullptr, update};
}

}  // namespace seam::boundary

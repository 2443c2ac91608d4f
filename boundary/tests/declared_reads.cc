#include "declared_reads.h"

#include <numeric>

#include "seam/comm/communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary::testing {
namespace {

class Declining final : public GatheringRead {
 public:
  std::string name() const override { return "declining"; }
  absl::StatusOr<bool> TryReadGather(const GatheringReadArgs&) override {
    ++GatheringReadCounters().declined;
    return false;
  }
};

class GatherThenNorm final : public GatheringRead {
 public:
  explicit GatherThenNorm(const NormParams* norm) : norm_(norm) {}
  std::string name() const override { return "gather_then_norm"; }
  absl::StatusOr<bool> TryReadGather(const GatheringReadArgs& a) override {
    if (a.update != nullptr && !a.update->caps().plain_add) return false;
    if (a.update != nullptr) SEAM_RETURN_IF_ERROR(kernels::AddInPlace(a.residual, a.contribution));
    const int64_t total = std::accumulate(a.slice_counts.begin(), a.slice_counts.end(), int64_t{0});
    Tensor all = Tensor::Empty({total, a.residual.dim(1)}, a.residual.dtype(), a.residual.device());
    const Tensor in = a.residual.is_contiguous() ? a.residual : a.residual.Clone();
    SEAM_RETURN_IF_ERROR(a.group->AllGatherV(in, a.slice_counts, all));
    if (total > 0) SEAM_RETURN_IF_ERROR(kernels::RmsNorm(all, norm_->weight, norm_->eps, a.out));
    ++GatheringReadCounters().gathered;
    return true;
  }

 private:
  const NormParams* norm_;
};

}  // namespace

GatheringReadCalls& GatheringReadCounters() {
  static GatheringReadCalls calls;
  return calls;
}

std::shared_ptr<GatheringRead> DecliningGatheringRead() { return std::make_shared<Declining>(); }
std::shared_ptr<GatheringRead> GatherThenNormRead(const NormParams* norm) {
  return std::make_shared<GatherThenNorm>(norm);
}

DeclaredRead::DeclaredRead(const NormParams* norm, ReadoutCaps caps,
                           std::vector<std::shared_ptr<GatheringRead>> gathering)
    : plain_(norm), caps_(caps), gathering_(std::move(gathering)) {}

}  // namespace seam::boundary::testing

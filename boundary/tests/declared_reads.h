// Test reads whose capabilities a grid chooses: the plain add + RMSNorm read
// declared with other ReadoutCaps (a read after the attention-DP gather, a
// read offering gathering reads), and gathering-read candidates: one that
// always declines and one that gathers the (updated) residual slices first
// and norms every row after, a different order that is still exact.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "seam/boundary/residual_ops.h"

namespace seam::boundary::testing {

// Calls of the candidates below (summed over every rank thread).
struct GatheringReadCalls {
  std::atomic<int> declined{0};
  std::atomic<int> gathered{0};
};
GatheringReadCalls& GatheringReadCounters();

// Declines every call (counted), touching nothing.
std::shared_ptr<GatheringRead> DecliningGatheringRead();
// Gathers the residual slices over attention TP (after adding the
// contribution, plain adds only; declines any other update), then norms
// every gathered row with `norm`.
std::shared_ptr<GatheringRead> GatherThenNormRead(const NormParams* norm);

// The add + RMSNorm read over `norm` with `caps` and the given gathering reads.
class DeclaredRead final : public ResidualReadout {
 public:
  DeclaredRead(const NormParams* norm, ReadoutCaps caps, std::vector<std::shared_ptr<GatheringRead>> gathering = {});
  std::string name() const override { return "declared_add_rmsnorm"; }
  ReadoutCaps caps() const override { return caps_; }
  absl::Status Read(const Tensor& residual, const Tensor& out) const override { return plain_.Read(residual, out); }
  absl::Status UpdateAndRead(const ResidualUpdate& update, const Tensor& contribution, const Tensor& residual,
                             const Tensor& out) const override {
    return plain_.UpdateAndRead(update, contribution, residual, out);
  }
  const NormParams* add_norm() const override { return caps_.add_norm ? plain_.norm() : nullptr; }
  std::vector<std::shared_ptr<GatheringRead>> GatheringReads() const override { return gathering_; }

 private:
  AddRmsNormRead plain_;
  ReadoutCaps caps_;
  std::vector<std::shared_ptr<GatheringRead>> gathering_;
};

}  // namespace seam::boundary::testing

// Manifold-constrained hyper-connections (MHC) as a residual update/read
// pair. The residual is expanded into n streams, stored [rows, n·H] (stream
// i in columns [i·H, (i+1)·H)). Each layer has static mixing coefficients:
//   read (consumer)   x   = RMSNorm(Σ_i pre_i · X_i)
//   update (producer) X'_i = Σ_j res_ij · X_j + post_i · y   (y: completed output)
//   init_residual     X_i = the stack input, for every i
// The update is not a plain add: bound paths apply it only to a completed
// contribution, never fuse it into a consumer's add+norm, and a pipeline
// handoff carries the written streams. Rounding order (kept by every path):
// the update accumulates in fp32 in j order, adds the post term, rounds to
// the residual's dtype; the read mixes in fp32 in i order, rounds, then norms.
// The mixes run as kernels::MhcPostMix / MhcPreMix on the tensors' device
// (host or CUDA), at most kernels::kMaxMhcStreams streams. Objects are
// immutable and shareable across ranks.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/residual_ops.h"

namespace seam::boundary {

struct MhcCoefficients {
  int streams = 1;
  std::vector<float> pre;   // [n]: the consumer's read mix
  std::vector<float> post;  // [n]: how the producer's output enters each stream
  std::vector<float> res;   // [n·n] row-major: res[i·n + j] mixes stream j into stream i
};
// INVALID_ARGUMENT unless streams ≥ 1 and every vector has its size.
absl::Status ValidateMhc(const MhcCoefficients& c);

class MhcUpdate final : public ResidualUpdate {
 public:
  static absl::StatusOr<std::shared_ptr<const MhcUpdate>> Make(MhcCoefficients coefficients);
  UpdateCaps caps() const override { return UpdateCaps{/*plain_add=*/false, /*applied_at_exit=*/false}; }
  std::string name() const override { return "mhc_post"; }
  absl::Status Apply(const Tensor& contribution, const Tensor& residual) const override;
  int streams() const { return c_.streams; }

 private:
  explicit MhcUpdate(MhcCoefficients c) : c_(std::move(c)) {}
  MhcCoefficients c_;
};

class MhcRead final : public ResidualReadout {
 public:
  // `norm` is the layer's norm over H (not owned; read at forward time).
  static absl::StatusOr<std::shared_ptr<const MhcRead>> Make(MhcCoefficients coefficients, const NormParams* norm);
  std::string name() const override { return "mhc_pre_rmsnorm"; }
  ReadoutCaps caps() const override { return Caps(); }
  static ReadoutCaps Caps() {
    ReadoutCaps c;
    c.add_norm = false;
    return c;
  }
  absl::StatusOr<Tensor> InitResidual(const Tensor& input) const override;
  int64_t InputWidth(int64_t residual_width) const override { return residual_width / c_.streams; }
  absl::Status Read(const Tensor& residual, const Tensor& out) const override;

 private:
  MhcRead(MhcCoefficients c, const NormParams* norm) : c_(std::move(c)), norm_(norm) {}
  MhcCoefficients c_;
  const NormParams* norm_;
};

}  // namespace seam::boundary

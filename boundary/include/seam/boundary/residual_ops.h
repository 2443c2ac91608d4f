// Residual update (owned by the producer) and residual readout (owned by the
// consumer). The update travels with a contribution; the readout turns the
// residual into the consumer's compute input. Both declare capabilities, and
// bound paths choose orderings only those capabilities allow.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

// What a producer's update can do.
//   plain_add        residual ← residual + contribution; may fuse into add+norm or
//                    be added on one rank before the sum
//   applied_at_exit  the producer applies it at its own exit
struct UpdateCaps {
  bool plain_add = true;
  bool applied_at_exit = false;
};

class ResidualUpdate {
 public:
  virtual ~ResidualUpdate() = default;
  virtual UpdateCaps caps() const = 0;
  virtual std::string name() const = 0;
};
// The plain add, shared by every stage that declares nothing else.
std::shared_ptr<const ResidualUpdate> PlainAddUpdate();

// What a consumer's read needs.
//   reads_before_dp_gather      must read on the source rows before a DP gather
//   reads_after_attn_tp_gather  needs every row of the attention's rows
struct ReadoutCaps {
  bool reads_before_dp_gather = true;
  bool reads_after_attn_tp_gather = false;
};

// RMSNorm parameters owned by a layer (filled when weights load; read at forward).
struct NormParams {
  Tensor weight;  // [H]
  float eps = 1e-6f;
};

// The plain add + RMSNorm read.
// UpdateAndRead: residual ← round(residual + contribution), out ← RMSNorm of the
// fp32 sum (one fused kernel). Read: out ← RMSNorm(residual).
class AddRmsNormRead {
 public:
  explicit AddRmsNormRead(const NormParams* norm) : norm_(norm) {}
  absl::Status UpdateAndRead(const Tensor& contribution, const Tensor& residual, const Tensor& out) const;
  absl::Status Read(const Tensor& residual, const Tensor& out) const;
  const NormParams* norm() const { return norm_; }

 private:
  const NormParams* norm_;
};

}  // namespace seam::boundary

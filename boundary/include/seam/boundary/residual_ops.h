// Residual update (owned by the producer) and residual readout (owned by the
// consumer). The update travels with a contribution; the readout turns the
// residual into the consumer's compute input. Both declare capabilities, and
// bound paths choose orderings only those capabilities allow: a plain add
// may fuse into add+norm or be added on one rank before a sum; any other
// update runs only on a completed contribution, as its own step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/boundary/layout.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

// A read's own way to complete a sum together with the residual add, tried
// ahead of the read and before any provider candidate or built-in
// collective (plain updates only). reads()=false: residual ← residual +
// Σ_group contribution, and the read then runs; reads()=true: it also writes
// out ← read of that residual. Declining (false) must touch nothing.
class ReadoutFusion {
 public:
  virtual ~ReadoutFusion() = default;
  virtual std::string name() const = 0;
  virtual SumGroup completes() const = 0;
  virtual bool reads() const = 0;
  virtual absl::StatusOr<bool> TryComplete(const Tensor& contribution, const Tensor& residual, const Tensor& out,
                                           comm::Communicator& group) = 0;
};

class ResidualUpdate;

// What a gathering read is handed: this rank's residual on its attention-TP
// slice (and, when `update` is set, the completed contribution to apply to
// it first, in place), and `out`, the read of its whole DP group's rows: the
// slices of the ranks of `group` (attention TP) in rank order, slice_counts
// rows each.
struct GatheringReadArgs {
  const ResidualUpdate* update = nullptr;
  Tensor contribution;
  Tensor residual;
  std::vector<int64_t> slice_counts;
  Tensor out;
  comm::Communicator* group = nullptr;
};

// A read's own way to read its slice and gather the read over attention TP
// in one operation (the design's gathering_reads), tried in order where a
// path reads on the slice and then gathers onto the DP rows; the read then
// the built-in gather otherwise. Declining (false) must touch nothing and
// start no collective.
class GatheringRead {
 public:
  virtual ~GatheringRead() = default;
  virtual std::string name() const = 0;
  virtual absl::StatusOr<bool> TryReadGather(const GatheringReadArgs& args) = 0;
};

// What a producer's update can do.
//   plain_add        residual ← residual + contribution; may fuse into add+norm or
//                    be added on one rank before the sum
//   applied_at_exit  the producer applies it at its own exit (its parameters
//                    then need not outlive the exit); the next stage enters written
struct UpdateCaps {
  bool plain_add = true;
  bool applied_at_exit = false;
};

class ResidualUpdate {
 public:
  virtual ~ResidualUpdate() = default;
  virtual UpdateCaps caps() const = 0;
  virtual std::string name() const = 0;
  // residual ← update(residual, contribution), in place. `contribution` is
  // complete (it owes no sum) and on the residual's rows.
  virtual absl::Status Apply(const Tensor& contribution, const Tensor& residual) const = 0;
};
// The plain add, shared by every stage that declares nothing else.
std::shared_ptr<const ResidualUpdate> PlainAddUpdate();

// What a consumer's read needs or allows.
//   reads_before_dp_gather      reads on the source rows before a DP gather
//   reads_after_attn_tp_gather  needs every row of the attention's rows
//   add_norm                    the read is the plain add + RMSNorm, so consumer
//                               fusion candidates may replace it
//   completing_fusions          the read offers its own ReadoutFusion candidates
//   gathering_reads             the read offers GatheringRead candidates (GatheringReads)
// reads_before_dp_gather = false: the read runs on the gathered rows (the
// residual is updated on its own rows, gathered, then read). A read after the
// attention-TP gather on a residual kept on slices runs the same way.
struct ReadoutCaps {
  bool reads_before_dp_gather = true;
  bool reads_after_attn_tp_gather = false;
  bool add_norm = true;
  bool completing_fusions = false;  // supplies its own candidates (CompletingFusions)
  bool gathering_reads = false;     // supplies its own candidates (GatheringReads)
};

// RMSNorm parameters owned by a layer (filled when weights load; read at forward).
struct NormParams {
  Tensor weight;  // [H]
  float eps = 1e-6f;
};

// A consumer's read of the residual. Implementations are immutable after
// construction and may be shared by every rank thread of one layer.
class ResidualReadout {
 public:
  virtual ~ResidualReadout() = default;
  virtual std::string name() const = 0;
  virtual ReadoutCaps caps() const = 0;
  // init_residual: the residual a stack starts from, given its input.
  virtual absl::StatusOr<Tensor> InitResidual(const Tensor& input) const { return input.Clone(); }
  // Width of the compute input read from a residual `residual_width` wide.
  virtual int64_t InputWidth(int64_t residual_width) const { return residual_width; }
  // out ← read(residual).
  virtual absl::Status Read(const Tensor& residual, const Tensor& out) const = 0;
  // Receives the producer's update with the read: residual ← update(residual,
  // contribution), out ← read. The default runs the update, then the read,
  // each rounding as it does alone; a read may fuse them when its rounding
  // order allows.
  virtual absl::Status UpdateAndRead(const ResidualUpdate& update, const Tensor& contribution,
                                     const Tensor& residual, const Tensor& out) const;
  // The norm of a plain add + RMSNorm read (what fusion candidates take); null otherwise.
  virtual const NormParams* add_norm() const { return nullptr; }
  // Ordered completing fusions (caps().completing_fusions), tried first.
  virtual std::vector<std::shared_ptr<ReadoutFusion>> CompletingFusions() const { return {}; }
  // Ordered gathering reads (caps().gathering_reads), tried before read + gather.
  virtual std::vector<std::shared_ptr<GatheringRead>> GatheringReads() const { return {}; }
};

// The plain add + RMSNorm read.
// UpdateAndRead with a plain add: residual ← round(residual + contribution),
// out ← RMSNorm of the fp32 sum (one fused kernel); with any other update it
// applies the update, then reads. Read: out ← RMSNorm(residual).
class AddRmsNormRead final : public ResidualReadout {
 public:
  explicit AddRmsNormRead(const NormParams* norm) : norm_(norm) {}
  std::string name() const override { return "add_rmsnorm"; }
  ReadoutCaps caps() const override { return ReadoutCaps{}; }
  absl::Status Read(const Tensor& residual, const Tensor& out) const override;
  absl::Status UpdateAndRead(const ResidualUpdate& update, const Tensor& contribution, const Tensor& residual,
                             const Tensor& out) const override;
  const NormParams* add_norm() const override { return norm_; }
  const NormParams* norm() const { return norm_; }

 private:
  const NormParams* norm_;
};

}  // namespace seam::boundary

// ResidualStream: the per-forward state one boundary hands to the next. It
// holds the residual and the producer's actual contribution (what it still
// owes), and it issues the Hidden values the model passes between calls.
//
// States: kInitial (nothing stored), kWritten (residual only), kPending
// (a contribution, plus the residual once one exists).
//
// Identity: every boundary call returns a new Hidden and accepts only the
// Hidden its stream issued last; a rebound value or another microbatch's
// value is rejected. Owned by its ForwardBatch; used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/residual_ops.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

class DeferredFinalize;

enum class StreamState : uint8_t { kInitial, kWritten, kPending };
const char* StreamStateName(StreamState state);

// A producer's output and the work it still owes.
struct Contribution {
  Tensor value;
  RowForm rows = RowForm::kDpRows;     // where value's rows are
  SumGroup owed = SumGroup::kNone;     // sum still to complete
  std::shared_ptr<const ResidualUpdate> update = PlainAddUpdate();
  // A MoE finalize handed on by a terminal exit (value undefined until completed).
  std::shared_ptr<const DeferredFinalize> deferred;
};

// The value a model holds between boundary calls. A Hidden that still owes a
// sum is an opaque handle: tensor() refuses it; pass it to the next boundary.
class Hidden {
 public:
  Hidden() = default;
  bool valid() const { return stream_id_ != 0; }
  bool owes_sum() const { return owes_sum_; }
  // The tensor, when nothing is owed; FAILED_PRECONDITION for an owed handle.
  absl::StatusOr<Tensor> tensor() const;
  // Rows of the value (allowed on an owed handle).
  int64_t rows() const { return value_.defined() ? value_.rows() : 0; }

 private:
  friend class ResidualStream;
  Tensor value_;
  bool owes_sum_ = false;
  uint64_t stream_id_ = 0;
  uint64_t value_id_ = 0;
};

class ResidualStream {
 public:
  explicit ResidualStream(uint64_t microbatch_id);

  uint64_t microbatch_id() const { return microbatch_id_; }
  StreamState state() const { return state_; }

  // OK when `h` is exactly the value this stream issued last.
  absl::Status CheckIdentity(const Hidden& h) const;
  // Issues the next value the model holds.
  Hidden Issue(const Tensor& value, bool owes_sum);
  // Marks the latest value as used: passing it again is an identity error.
  void Consume() { last_issued_ = 0; }
  // The tensor behind a value this stream issued (owed handles included).
  static const Tensor& ValueOf(const Hidden& h) { return h.value_; }

  // Rows of the stack input while kInitial (DP rows, or slices when input-scattered).
  RowForm initial_rows() const { return initial_rows_; }
  void set_initial_rows(RowForm form) { initial_rows_ = form; }

  bool has_residual() const { return residual_.defined(); }
  const Tensor& residual() const { return residual_; }
  RowForm residual_form() const { return residual_form_; }
  // The pending contribution (nullptr unless kPending).
  Contribution* pending() { return state_ == StreamState::kPending ? &contribution_ : nullptr; }
  const Contribution* pending() const { return state_ == StreamState::kPending ? &contribution_ : nullptr; }

  // kInitial/kWritten/kPending → kPending with `c`; the residual is kept.
  void Record(Contribution c);
  // → kWritten: residual ← `residual` on `form`; any contribution is dropped.
  void Write(Tensor residual, RowForm form);
  // Keeps the state; replaces the residual view (e.g. narrowed to a slice).
  void ReplaceResidual(Tensor residual, RowForm form);

 private:
  uint64_t microbatch_id_;
  uint64_t stream_id_;
  uint64_t next_value_id_ = 1;
  uint64_t last_issued_ = 0;
  StreamState state_ = StreamState::kInitial;
  Tensor residual_;
  RowForm residual_form_ = RowForm::kDpRows;
  RowForm initial_rows_ = RowForm::kDpRows;
  Contribution contribution_;
};

}  // namespace seam::boundary

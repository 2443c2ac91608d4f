#include "seam/boundary/residual_stream.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "seam/boundary/boundary_errors.h"

namespace seam::boundary {

const char* StreamStateName(StreamState state) {
  switch (state) {
    case StreamState::kInitial: return "initial";
    case StreamState::kWritten: return "written";
    case StreamState::kPending: return "pending";
  }
  return "?";
}

absl::StatusOr<Tensor> Hidden::tensor() const {
  if (!valid()) return absl::FailedPreconditionError("hidden value is empty (no boundary issued it)");
  if (owes_sum_) return errors::OwedOutputUsedAsTensor();
  return value_;
}

namespace {
uint64_t NextStreamId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}
}  // namespace

ResidualStream::ResidualStream(uint64_t microbatch_id) : microbatch_id_(microbatch_id), stream_id_(NextStreamId()) {}

absl::Status ResidualStream::CheckIdentity(const Hidden& h) const {
  if (!h.valid() || h.stream_id_ != stream_id_ || h.value_id_ != last_issued_) {
    return errors::NotThisStreamsOutput(microbatch_id_);
  }
  return absl::OkStatus();
}

Hidden ResidualStream::Issue(const Tensor& value, bool owes_sum) {
  Hidden h;
  h.value_ = value;
  h.owes_sum_ = owes_sum;
  h.stream_id_ = stream_id_;
  h.value_id_ = next_value_id_++;
  last_issued_ = h.value_id_;
  return h;
}

void ResidualStream::Record(Contribution c) {
  contribution_ = std::move(c);
  state_ = StreamState::kPending;
}

void ResidualStream::Write(Tensor residual, RowForm form) {
  residual_ = std::move(residual);
  residual_form_ = form;
  contribution_ = Contribution{};
  state_ = StreamState::kWritten;
}

void ResidualStream::ReplaceResidual(Tensor residual, RowForm form) {
  residual_ = std::move(residual);
  residual_form_ = form;
}

}  // namespace seam::boundary

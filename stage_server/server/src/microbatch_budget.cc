// The budget of a microbatch on a stage (MicrobatchDescriptor.budget_ms):
// the coordinator's deadline for it, counted from its arrival here. Every
// wait of the microbatch for a neighbour ends by it, and a stage that finds
// it spent answers DEADLINE_EXCEEDED naming itself instead of computing or
// sending, so one slow microbatch fails alone, in time for the coordinator
// (which waits a little longer before it calls a stage hung).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "microbatch_runner.h"

namespace seam::server {

void MicrobatchRunner::StartBudget(const v1::MicrobatchDescriptor& d, absl::Time arrived) {
  budget_ms_ = d.budget_ms();
  budget_end_ = budget_ms_ > 0 ? arrived + absl::Milliseconds(static_cast<int64_t>(budget_ms_))
                               : absl::InfiniteFuture();
}

absl::Time MicrobatchRunner::WaitDeadline() const {
  return budget_ms_ > 0 ? budget_end_ : absl::Now() + handoff_timeout_;
}

absl::Time MicrobatchRunner::SendDeadline() const { return std::max(WaitDeadline(), absl::Now()) + handoff_timeout_; }

absl::Status MicrobatchRunner::CheckBudget(const v1::MicrobatchDescriptor& d, const char* what) const {
  if (budget_ms_ == 0 || absl::Now() <= budget_end_) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("pipeline rank ", config_.pipeline_rank(), ": microbatch ",
                                                  d.microbatch_id(), " ran out of its budget of ", budget_ms_,
                                                  " ms ", what));
}

}  // namespace seam::server

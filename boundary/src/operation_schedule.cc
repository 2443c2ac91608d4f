#include "seam/boundary/operation_schedule.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::boundary {

const char* TboOrderName(TboOrder order) {
  switch (order) {
    case TboOrder::kAlternate: return "alternate";
    case TboOrder::kAlternateBFirst: return "alternate-b-first";
    case TboOrder::kStaggered: return "staggered";
    case TboOrder::kSequential: return "sequential";
  }
  return "?";
}

std::vector<ScheduledOp> MakeTboSchedule(TboOrder order, int ops) {
  std::vector<ScheduledOp> s;
  switch (order) {
    case TboOrder::kAlternate:
    case TboOrder::kAlternateBFirst: {
      const int first = order == TboOrder::kAlternate ? 0 : 1;
      for (int k = 0; k < ops; ++k) {
        s.push_back({first, k});
        s.push_back({1 - first, k});
      }
      break;
    }
    case TboOrder::kStaggered:
      for (int k = 0; k <= ops; ++k) {
        if (k < ops) s.push_back({0, k});
        if (k > 0) s.push_back({1, k - 1});
      }
      break;
    case TboOrder::kSequential:
      for (int mb = 0; mb < 2; ++mb) {
        for (int k = 0; k < ops; ++k) s.push_back({mb, k});
      }
      break;
  }
  return s;
}

absl::Status CheckSchedule(const std::vector<ScheduledOp>& schedule, int ops) {
  int next[2] = {0, 0};
  for (size_t i = 0; i < schedule.size(); ++i) {
    const ScheduledOp& s = schedule[i];
    if (s.microbatch != 0 && s.microbatch != 1) {
      return absl::InvalidArgumentError(absl::StrCat("schedule entry ", i, " names microbatch ", s.microbatch));
    }
    if (s.op != next[s.microbatch]) {
      return absl::InvalidArgumentError(absl::StrCat("schedule entry ", i, " runs operation ", s.op,
                                                     " of microbatch ", s.microbatch == 0 ? "A" : "B",
                                                     "; its next one is ", next[s.microbatch]));
    }
    ++next[s.microbatch];
  }
  if (next[0] != ops || next[1] != ops) {
    return absl::InvalidArgumentError(absl::StrCat("schedule runs ", next[0], " and ", next[1],
                                                   " operations of A and B; each has ", ops));
  }
  return absl::OkStatus();
}

absl::Status CheckYieldPoint(const ForwardBatch& batch) {
  if (batch.open_exit_scopes == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "microbatch ", batch.microbatch_id, " reached a two-batch yield point with an exit scope open: an ",
      "operation-scheduled FFN completes with CompleteNow, and no exit scope is held across a yield point"));
}

absl::Status RunOperationSchedule(const std::vector<ScheduledOp>& schedule, int ops, MicrobatchPair& pair,
                                  const MicrobatchOp& run, const ScheduleHooks& hooks) {
  SEAM_RETURN_IF_ERROR(CheckSchedule(schedule, ops));
  if (pair.a.stream != nullptr && pair.a.stream == pair.b.stream) {
    return absl::FailedPreconditionError("the two microbatches of a two-batch overlap share one residual stream");
  }
  for (int i = 0; i < 2; ++i) {
    if (!pair.batch(i).operation_scheduled) {
      return absl::FailedPreconditionError(absl::StrCat(
          "microbatch ", pair.batch(i).microbatch_id,
          " is not operation-scheduled: split it with SplitMicrobatches (its FFNs then complete with CompleteNow)"));
    }
  }
  int current = -1;
  for (const ScheduledOp& s : schedule) {
    if (s.microbatch != current && hooks.enter) SEAM_RETURN_IF_ERROR(hooks.enter(s.microbatch));
    current = s.microbatch;
    ForwardBatch& batch = pair.batch(s.microbatch);
    SEAM_RETURN_IF_ERROR(Annotate(run(s.microbatch, s.op, batch, pair.hidden(s.microbatch)),
                                  absl::StrCat("microbatch ", s.microbatch == 0 ? "A" : "B", " operation ", s.op)));
    SEAM_RETURN_IF_ERROR(CheckYieldPoint(batch));
  }
  return absl::OkStatus();
}

}  // namespace seam::boundary

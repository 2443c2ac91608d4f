// The operation-scheduled driver of a two-batch overlap: it runs the
// operations of two microbatches (two_batch.h) in an interleaved order.
// An operation is what one microbatch runs between two yield points, e.g. an
// attention stage's prepare → compute → finish, or an FFN's prepare →
// compute → CompleteNow. At a yield point the other microbatch runs, so a
// collective one microbatch issued just before it can overlap the other's
// compute: on GPUs each microbatch runs on its own CUDA stream (made current
// by the `enter` hook) with its own communicators. The model supplies the
// operations; the driver never issues a collective itself.
//
// Checks (FAILED_PRECONDITION): the two microbatches never share a stream
// (nor a ForwardBatch), both are operation-scheduled, and no exit scope is
// open on a microbatch at any yield point. INVALID_ARGUMENT for a schedule
// that does not run every operation of both exactly once, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/residual_stream.h"
#include "seam/boundary/two_batch.h"

namespace seam::boundary {

struct ScheduledOp {
  int microbatch = 0;  // 0: A, 1: B
  int op = 0;
};

// Interleavings of two microbatches of `ops` operations each.
//   kAlternate       A0 B0 A1 B1 ...: A leads every operation
//   kAlternateBFirst B0 A0 B1 A1 ...
//   kStaggered       A0 A1 B0 A2 B1 ... B(n-1): A one operation ahead, so
//                    B's operation k runs while A's k + 1 is in flight
//   kSequential      A0 ... A(n-1) B0 ... B(n-1): no overlap
enum class TboOrder : uint8_t { kAlternate, kAlternateBFirst, kStaggered, kSequential };
const char* TboOrderName(TboOrder order);  // "alternate", "alternate-b-first", "staggered", "sequential"
std::vector<ScheduledOp> MakeTboSchedule(TboOrder order, int ops);

// OK when `schedule` runs operations 0 .. ops-1 of both microbatches, each once, in order.
absl::Status CheckSchedule(const std::vector<ScheduledOp>& schedule, int ops);
// OK at a yield point of `batch`; FAILED_PRECONDITION when an exit scope is open on it.
absl::Status CheckYieldPoint(const ForwardBatch& batch);

// One operation: `hidden` is the microbatch's latest value, replaced by the
// value the operation's last boundary call returned.
using MicrobatchOp = std::function<absl::Status(int microbatch, int op, ForwardBatch& batch, Hidden& hidden)>;

struct ScheduleHooks {
  // Before the first operation and whenever the microbatch changes (e.g.
  // makes that microbatch's CUDA stream current).
  std::function<absl::Status(int microbatch)> enter;
};

// Runs `schedule` over `pair`, each operation through `run`, checking the
// schedule first and every yield point (after each operation) as it goes.
absl::Status RunOperationSchedule(const std::vector<ScheduledOp>& schedule, int ops, MicrobatchPair& pair,
                                  const MicrobatchOp& run, const ScheduleHooks& hooks = {});

}  // namespace seam::boundary

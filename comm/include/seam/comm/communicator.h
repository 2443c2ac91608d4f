// Communicator: the collectives of one process group (a TP, attention-TP or
// attention-DP group of one stage). Tensors are row-major with tokens as
// rows; "rows" below means the size of dim 0. Every rank of the group must
// issue the same calls in the same order with matching shapes and dtypes.
//
// Deadlines: every call waits at most the communicator's timeout
// (CommOptions::timeout), and Synchronize at most its deadline. A peer that
// does not arrive in time gives DEADLINE_EXCEEDED; a peer whose connection
// breaks gives UNAVAILABLE. After either, the communicator is broken and
// every later call fails fast with FAILED_PRECONDITION naming the first
// error. Nothing hangs. The errors of an enqueued NCCL collective (see
// Completion) may surface only at Synchronize: a peer that never arrives
// gives DEADLINE_EXCEEDED there, not at the call, and breaks it the same way.
//
// Completion: Gloo, self and recording calls have finished when they return.
// NCCL calls are stream-ordered: a call returns once its collective is in
// the caller's CUDA stream, without waiting for the GPU; work issued later
// on that stream sees its result, the host only after Synchronize. The
// tensors of a call must stay valid until then, unless freed in the stream's
// order (seam's allocator on that stream). A step ends with one Synchronize
// (ProcessGroups::Synchronize for all the groups of a rank).
//
// Thread safety: one communicator is used by one thread (its rank's thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "seam/core/tensor.h"

namespace seam::comm {

struct CommOptions {
  // Longest any single call (or the initial rendezvous) may wait for peers.
  absl::Duration timeout = absl::Seconds(30);
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group's name, e.g. "tp", "attn_tp", "attn_dp" (used in logs and errors).
  virtual const std::string& name() const = 0;

  // In place: data ← Σ_ranks data. Floating dtypes are summed in fp32 and rounded once.
  virtual absl::Status AllReduce(const Tensor& data) = 0;
  // input [size·R, ...] summed over ranks; this rank receives rows [rank·R, (rank+1)·R) in output [R, ...].
  virtual absl::Status ReduceScatter(const Tensor& input, const Tensor& output) = 0;
  // input [Σ row_counts, ...] summed over ranks; rank r receives its row_counts[r] rows
  // (starting at Σ_{q<r} row_counts[q]) in output [row_counts[rank], ...]. Counts may be zero.
  virtual absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                                      const Tensor& output) = 0;
  // output [size·R, ...] ← concatenation of every rank's input [R, ...] in rank order.
  virtual absl::Status AllGather(const Tensor& input, const Tensor& output) = 0;
  // output [Σ row_counts, ...] ← concatenation of input [row_counts[r], ...] of each rank r.
  virtual absl::Status AllGatherV(const Tensor& input, const std::vector<int64_t>& row_counts,
                                  const Tensor& output) = 0;
  // In place: every rank's data ← root's data.
  virtual absl::Status Broadcast(const Tensor& data, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // Waits until every call issued so far has finished (for NCCL: until the
  // stream has finished everything enqueued on it), at most until `deadline`;
  // a missed deadline or a peer error breaks the communicator as a failing
  // call does. The default, OK at once, is right for backends whose calls
  // complete before they return (Gloo, self, recording; it is not logged).
  virtual absl::Status Synchronize(absl::Time deadline) {
    (void)deadline;
    return absl::OkStatus();
  }
};

}  // namespace seam::comm

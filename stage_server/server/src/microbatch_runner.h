// MicrobatchRunner: runs one microbatch descriptor on a configured stage,
// from checks through compute to its answer: receive the previous stage's
// handoff (non-first), compute, then send the handoff on (non-last) or
// sample each sequence's next token (last). Owned and driven by the stage
// actor's thread, which also owns the UCX worker it uses.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/runtime/stage_group.h"
#include "device_handoff_link.h"
#include "seam/v1/stage_service.pb.h"
#include "sequence_sampler.h"
#include "stage_metrics.h"

namespace seam::server {

class MicrobatchRunner {
 public:
  // `previous` / `next`: endpoints to the neighbours (invalid where there is
  // none). Handoffs are sealed and verified under config.handoff_key(); one
  // listing more than `max_handoff_payload_bytes` is dropped unread.
  // `metrics` (may be null) times steps and handoffs. `links`: whether and
  // how the links to the neighbours may go GPU to GPU (device_handoff_link.h).
  MicrobatchRunner(const v1::StageConfig& config, std::unique_ptr<runtime::StageGroup> group, handoff::UcxWorker& worker,
                   handoff::UcxEndpoint previous, handoff::UcxEndpoint next, absl::Duration handoff_timeout,
                   uint64_t max_handoff_payload_bytes, StageMetrics* metrics = nullptr,
                   const HandoffLinkOptions& links = {});

  // Runs `d` and returns its answer; an error of any step becomes the
  // result's error, with this stage's pipeline rank. Never throws, never
  // waits past the handoff timeout for a neighbour.
  v1::MicrobatchResult Run(const v1::MicrobatchDescriptor& d);

  // The answer for a descriptor that is not run (drained away, abandoned).
  v1::MicrobatchResult Refuse(const v1::MicrobatchDescriptor& d, const absl::Status& why) const;

  // The sequence number of the last descriptor taken in this epoch; 0 before any.
  uint64_t last_sequence_number() const { return last_sequence_number_; }
  bool has_neighbours() const { return previous_.valid() || next_.valid(); }
  // Free KV blocks of each attention-DP group.
  std::vector<uint64_t> FreeBlocks() const;
  // Data-plane messages dropped since this runner was made: handoff headers
  // (none on a first stage), and replies of the next stage's device link.
  handoff::HandoffDrops drops() const;
  // How handoffs travel from the previous stage and to the next one
  // (UNSPECIFIED where there is no such neighbour).
  v1::HandoffTransport transport_in() const;
  v1::HandoffTransport transport_out() const;

 private:
  absl::Status RunChecked(const v1::MicrobatchDescriptor& d, v1::MicrobatchResult& result);
  // The previous stage's handoff for `d`, within the handoff timeout.
  absl::StatusOr<std::vector<boundary::PipelineTensors>> ReceiveHandoff(const v1::MicrobatchDescriptor& d);
  // After a step: its time, each rank's Synchronize wait, graph or eager.
  void RecordStep(double seconds);

  v1::StageConfig config_;
  std::unique_ptr<runtime::StageGroup> group_;
  handoff::UcxWorker& worker_;
  handoff::UcxEndpoint previous_, next_;
  absl::Duration handoff_timeout_;
  std::unique_ptr<IncomingLink> incoming_;  // from previous_; null on the first stage
  std::unique_ptr<OutgoingLink> outgoing_;  // to next_; null on the last stage
  SequenceSampler sampler_;
  uint64_t last_sequence_number_ = 0;
  absl::Time last_answer_ = absl::InfinitePast();  // when the previous microbatch ended (debug timing)
  // Set when a handoff wait ran out of time: the previous stage may still
  // send that handoff, so the next wait discards handoffs of other
  // microbatches instead of failing on them.
  bool late_handoff_possible_ = false;
  // Metrics of this pipeline rank, and the graph counts already reported.
  std::optional<StageMetrics::Rank> metrics_;
  int64_t graph_replays_seen_ = 0, eager_steps_seen_ = 0;
};

}  // namespace seam::server

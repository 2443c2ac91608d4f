// The tokens a stage that both starts and ends the pipeline (one pipeline
// stage) chose in the microbatch it ran last, for the decode steps of the
// next one that feed them (SequenceEntry.feed_previous_token): the
// coordinator builds and sends a step while the step before it still runs,
// before it knows that step's token (SchedulerOptions::overlap_steps).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::server {

class FedTokens {
 public:
  // `d` as it runs: `d` itself when no entry feeds, else a copy in `storage`
  // with each feeding entry's token filled in. A feeding entry whose
  // sequence had no token chosen in the microbatch before (it was not in it,
  // or failed there) is left out of the copy and gets an ABORTED result in
  // `dropped`, so the other sequences still run (the copy may then have none
  // left). Every sequence of `d` drops its recorded token (its next comes
  // from `d`). INVALID_ARGUMENT: a feeding entry with token ids, a feeding
  // prefill, feeding in a multi-step descriptor, or on a stage that does not
  // choose tokens for the first (`feeds_here` false).
  absl::StatusOr<const v1::MicrobatchDescriptor*> Fill(const v1::MicrobatchDescriptor& d, bool feeds_here,
                                                       v1::MicrobatchDescriptor& storage,
                                                       std::vector<v1::SequenceResult>& dropped);
  // The tokens `result` (a single-step microbatch's last-stage answer) chose.
  void Record(const v1::MicrobatchResult& result);
  void Forget(uint64_t sequence_id) { chosen_.erase(sequence_id); }
  // The entries the last Fill found feeding.
  int filled() const { return filled_; }

 private:
  int filled_ = 0;
  absl::flat_hash_map<uint64_t, int32_t> chosen_;  // sequence id -> token chosen in the last microbatch
};

}  // namespace seam::server

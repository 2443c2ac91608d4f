// A descriptor's cached-block changes and shared blocks (see cached_blocks.h).
#include "cached_blocks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::server {
namespace {

absl::Status Named(const absl::Status& s, const std::string& field) {
  return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
}

}  // namespace

absl::Status ApplyCachedBlockChanges(const v1::MicrobatchDescriptor& d, runtime::StageGroup& group) {
  for (int i = 0; i < d.published_blocks_size(); ++i) {
    const v1::CachedBlock& b = d.published_blocks(i);
    absl::Status s = group.PublishCached(b.sequence_id(), b.block_index(), b.block_id());
    if (!s.ok()) return Named(s, absl::StrCat("published_blocks[", i, "]"));
  }
  for (int i = 0; i < d.evicted_blocks_size(); ++i) {
    const v1::CachedBlock& b = d.evicted_blocks(i);
    absl::Status s = group.EvictCached(static_cast<int>(b.dp_group()), b.block_id());
    if (!s.ok()) return Named(s, absl::StrCat("evicted_blocks[", i, "]"));
  }
  return absl::OkStatus();
}

absl::Status MapSharedBlocks(const v1::MicrobatchDescriptor& d, runtime::StageGroup& group) {
  const int64_t block_size = group.KvBlockSize();
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    if (s.shared_block_ids().empty()) continue;
    const std::string field = absl::StrCat("sequences[", i, "].shared_block_ids");
    if (group.Limits().state_slots_per_dp_group > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          field, ": this stage's model keeps recurrent state per sequence, so it opts out of prefix caching"));
    }
    const uint64_t tokens = static_cast<uint64_t>(s.shared_block_ids_size()) * static_cast<uint64_t>(block_size);
    if (!s.is_prefill() || s.position_start() != tokens) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.shared_block_ids_size(), " blocks of ", block_size,
                                                     " tokens hold ", tokens, " positions, but sequence ",
                                                     s.sequence_id(), " (request '", s.server_request_id(), "') ",
                                                     s.is_prefill() ? "starts its prefill at position "
                                                                    : "is a decode step at position ",
                                                     s.position_start()));
    }
    std::vector<uint64_t> ids(s.shared_block_ids().begin(), s.shared_block_ids().end());
    absl::Status mapped = group.ShareCached(s.sequence_id(), static_cast<int>(s.dp_group()), ids);
    if (!mapped.ok()) return Named(mapped, field);
  }
  return absl::OkStatus();
}

}  // namespace seam::server

// Prefix caching on a stage: what a descriptor says about cached KV blocks
// (published, evicted, and the cached blocks a starting sequence maps),
// applied to the stage's group on every rank of the named DP group. The
// coordinator decides all of it (coordinator/src/prefix_cache.h); a stage
// only follows, and refuses what does not fit its own state.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "seam/runtime/stage_group.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::server {

// The descriptor's published_blocks, then its evicted_blocks (before its
// finished sequences are freed). The first error, naming the field.
absl::Status ApplyCachedBlockChanges(const v1::MicrobatchDescriptor& d, runtime::StageGroup& group);

// Each starting sequence's shared_block_ids (after the frees): on a prefill
// entry whose position_start is exactly their tokens (INVALID_ARGUMENT
// otherwise), on a stage without recurrent state (FAILED_PRECONDITION: its
// model opts out of prefix caching).
absl::Status MapSharedBlocks(const v1::MicrobatchDescriptor& d, runtime::StageGroup& group);

}  // namespace seam::server

// Strays: the messages on a stage's UCX worker that no receive of the
// current link will ever take (handoff_tag.h): a tag kind the handoff does
// not use, or a handoff kind under another link tag (an endpoint without
// the epoch's key, or a late message of the previous epoch). UCX keeps an
// unmatched message until someone takes it, so they are taken off the wire
// unread and counted, wherever the worker is progressed: in every handoff
// wait and while the stage is idle. What stays queued in UCX is then only
// what arrived since the last drain, and messages under the link's own tag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "seam/handoff/handoff.h"
#include "seam/handoff/ucx_worker.h"

namespace seam::handoff {

// Takes every stray already on `worker` for the link tag `link`, at most
// `max_messages`, counting each in `drops`: unknown_kind for a kind outside
// the handoff's, stale_epoch under `previous_link` (when set), unknown_peer
// otherwise; also incomplete when its transfer failed. Never waits. Returns
// how many it took.
size_t DrainStrays(UcxWorker& worker, uint64_t link, std::optional<uint64_t> previous_link, HandoffDrops& drops,
                   size_t max_messages = 4096);

// Takes every message already on `worker`, whatever its tag, counting it as
// stale_epoch when it carries `stale_link` (the epoch that ends) and as
// DrainStrays would otherwise: what a stage does when it reloads for a new
// epoch. Never waits. Returns how many it took.
size_t DrainAll(UcxWorker& worker, uint64_t stale_link, HandoffDrops& drops, size_t max_messages = 1 << 20);

}  // namespace seam::handoff

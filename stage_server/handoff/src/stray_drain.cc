// Taking strays off a UCX worker (stray_drain.h). The complement of the
// link's tags, {kind in 1..3 and link bits == link}, is covered by masked
// probes: the kinds outside 1..3 (0, 4-7, 8-15) and, for each of the 44
// link bits, the messages whose bit differs from the link's.
#include "seam/handoff/stray_drain.h"

#include <utility>
#include <vector>

#include "seam/handoff/handoff_tag.h"

namespace seam::handoff {
namespace {

struct Pattern {
  uint64_t tag;
  uint64_t mask;
};

std::vector<Pattern> StrayPatterns(uint64_t link) {
  std::vector<Pattern> patterns = {
      {uint64_t{0x0} << kTagKindShift, kTagKindMask},          // kind 0
      {uint64_t{0x4} << kTagKindShift, uint64_t{0xC} << kTagKindShift},  // kinds 4-7
      {uint64_t{0x8} << kTagKindShift, uint64_t{0x8} << kTagKindShift},  // kinds 8-15
  };
  for (int b = 0; b < 44; ++b) {
    const uint64_t bit = uint64_t{1} << (kTagLinkShift + b);
    const uint64_t ours = (link << kTagLinkShift) & bit;
    patterns.push_back({ours ^ bit, bit});
  }
  return patterns;
}

void Count(const UcxWorker::Unread& m, std::optional<uint64_t> previous_link, HandoffDrops& drops) {
  if (m.failed) ++drops.incomplete;
  if (!IsHandoffKind(TagKind(m.tag))) {
    ++drops.unknown_kind;
  } else if (previous_link.has_value() && TagLink(m.tag) == *previous_link) {
    ++drops.stale_epoch;
  } else {
    ++drops.unknown_peer;
  }
}

}  // namespace

size_t DrainStrays(UcxWorker& worker, uint64_t link, std::optional<uint64_t> previous_link, HandoffDrops& drops,
                   size_t max_messages) {
  // One pattern set per link tag: a link lives for an epoch.
  thread_local std::pair<uint64_t, std::vector<Pattern>> cached{~uint64_t{0}, {}};
  if (cached.first != link) cached = {link, StrayPatterns(link & kTagLinkBits)};
  size_t taken = 0;
  for (const Pattern& p : cached.second) {
    while (taken < max_messages) {
      std::optional<UcxWorker::Unread> m = worker.TakeUnread(p.tag, p.mask);
      if (!m.has_value()) break;
      Count(*m, previous_link, drops);
      ++taken;
    }
  }
  return taken;
}

size_t DrainAll(UcxWorker& worker, uint64_t stale_link, HandoffDrops& drops, size_t max_messages) {
  worker.Progress();
  size_t taken = 0;
  while (taken < max_messages) {
    std::optional<UcxWorker::Unread> m = worker.TakeUnread(0, 0);
    if (!m.has_value()) {
      if (!worker.Progress()) break;  // nothing more on its way
      continue;
    }
    if (IsHandoffKind(TagKind(m->tag)) && TagLink(m->tag) == stale_link) {
      if (m->failed) ++drops.incomplete;
      ++drops.stale_epoch;
    } else {
      Count(*m, std::nullopt, drops);
    }
    ++taken;
  }
  return taken;
}

}  // namespace seam::handoff

// The scheduler's use of the prefix cache: placement by cached prefix,
// allocation that evicts, publication of completed prompt blocks.
#include <algorithm>

#include "scheduler_impl.h"
#include "seam/core/status.h"

namespace seam::coordinator {

PrefixCacheStats SchedulerImpl::PrefixStats() const {
  PrefixCacheStats stats = prefix_stats_;
  stats.cached_blocks = 0;
  for (int g = 0; g < options_.dp_groups; ++g) stats.cached_blocks += prefix_.Cached(g);
  return stats;
}

bool SchedulerImpl::TakeBlocks(int group, int blocks) {
  if (blocks > Available(group)) return false;
  const int short_by = blocks - kv_.Free(group);
  if (short_by > 0) {
    const std::vector<uint64_t> gone = prefix_.Evict(group, short_by);
    kv_.Release(group, static_cast<int>(gone.size()));
    prefix_stats_.evictions += gone.size();
    for (uint64_t id : gone) evicted_.push_back(CachedBlockChange{group, id, "", 0, 0});
  }
  return kv_.TryAllocate(group, blocks);
}

// Among the eligible groups where the request fits (its own blocks free once
// unreferenced cached blocks other than its hits are evicted): the most hits,
// then KvBudget::PickGroup's order (most free blocks, fewest sequences,
// lowest index).
SchedulerImpl::Placement SchedulerImpl::Place(const RequestState& state, const std::vector<bool>& eligible) {
  const int total = kv_.BlocksFor(state.AdmissionKvTokens());
  const Request& r = state.request;
  if (!options_.prefix_caching || state.cache_tokens.empty()) {
    return Placement{kv_.PickGroup(total, sequences_on_group_, eligible), {}};
  }
  // The last prompt token is always computed: it gives the first logits.
  const int max_blocks = std::min(static_cast<int>(state.cache_tokens.size()), state.prefill_target - 1) / kv_.BlockSize();
  Placement best;
  for (int g = 0; g < options_.dp_groups; ++g) {
    if (!eligible[g]) continue;
    std::vector<uint64_t> hits = prefix_.Match(g, state.cache_tokens, r.cache_salt, max_blocks);
    const int own = total - static_cast<int>(hits.size());
    if (own > Available(g) - prefix_.Unreferenced(g, hits)) continue;
    const bool better =
        best.group < 0 || hits.size() > best.hits.size() ||
        (hits.size() == best.hits.size() &&
         (kv_.Free(g) > kv_.Free(best.group) ||
          (kv_.Free(g) == kv_.Free(best.group) && sequences_on_group_[g] < sequences_on_group_[best.group])));
    if (better) best = Placement{g, std::move(hits)};
  }
  if (best.group >= 0) {
    prefix_stats_.queries += 1;
    prefix_stats_.query_tokens += static_cast<uint64_t>(state.prefill_target);
    prefix_stats_.hit_tokens += best.hits.size() * static_cast<uint64_t>(kv_.BlockSize());
  }
  return best;
}

void SchedulerImpl::RecordCacheToken(RequestState& state, int32_t token) {
  if (options_.prefix_caching && !state.cache_tokens.empty()) state.cache_tokens.push_back(token);
}

void SchedulerImpl::PublishBlocks(RequestState& state) {
  const Request& r = state.request;
  if (!options_.prefix_caching || state.cache_tokens.empty()) return;
  const int bs = kv_.BlockSize();
  const int full = std::min(static_cast<int>(state.cache_tokens.size()), state.kv_tokens) / bs;
  for (; state.chain_blocks < full; ++state.chain_blocks) {
    const int index = state.chain_blocks;
    const auto [id, inserted] =
        prefix_.Insert(state.dp_group, state.chain_parent, state.cache_tokens.data() + index * bs, r.cache_salt);
    state.chain_parent = id;
    // An equal block cached meanwhile by another sequence: this one's copy
    // stays its own (and the chain goes on through the cached one).
    if (!inserted) continue;
    SEAM_CHECK_MSG(state.blocks > 0, "request '", r.id, "' publishes block ", index, " but holds no block of its own");
    state.blocks -= 1;
    state.cached_blocks.push_back(id);
    published_.push_back(CachedBlockChange{state.dp_group, id, r.id, r.sequence_tag, index});
  }
}

void SchedulerImpl::ReleaseCached(RequestState& state) {
  if (!state.cached_blocks.empty()) prefix_.Release(state.dp_group, state.cached_blocks);
  state.cached_blocks.clear();
}

void SchedulerImpl::DropPrefixCache() {
  for (int g = 0; g < options_.dp_groups; ++g) {
    SEAM_CHECK_MSG(prefix_.Evictable(g) == prefix_.Cached(g), "dropping the prefix cache of DP group ", g,
                   " while sequences map ", prefix_.Cached(g) - prefix_.Evictable(g), " of its blocks");
    kv_.Release(g, prefix_.Cached(g));
  }
  prefix_.Clear();
  published_.clear();
  evicted_.clear();
}

}  // namespace seam::coordinator

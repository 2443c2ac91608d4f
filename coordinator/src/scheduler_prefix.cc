// The scheduler's use of the prefix cache: placement by cached (or
// in-flight) prefix against load, allocation that evicts, publication of
// completed prompt blocks.
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

int64_t SchedulerImpl::GroupLoad(int group) const {
  int64_t load = 0;
  for (const auto& [order, id] : running_) {
    const RequestState& s = requests_.at(id);
    if (s.dp_group == group) load += s.phase == Phase::kPrefilling ? s.PrefillRemaining() : 1;
  }
  return load;
}

// A sequence S of the group will publish block m of the request's prompt
// (the first it misses) when S is prefilling, under the same salt, with its
// chain at block c <= m on the request's chain (its parent the request's
// hit c - 1, or none at c = 0: the ids name whole prefixes), the same
// tokens in blocks c .. m, and block m among the full blocks of its
// prefill. S's chain at c > m would have put an equal block m in the cache.
int SchedulerImpl::InFlightBlocks(int group, const RequestState& state, const std::vector<uint64_t>& hits,
                                  int max_blocks) const {
  const int bs = kv_.BlockSize();
  const int m = static_cast<int>(hits.size());
  if (m >= max_blocks) return 0;
  int best = 0;
  for (const auto& [order, id] : running_) {
    const RequestState& s = requests_.at(id);
    if (s.dp_group != group || s.phase != Phase::kPrefilling || s.cache_tokens.empty() ||
        s.request.cache_salt != state.request.cache_salt) {
      continue;
    }
    const int c = s.chain_blocks;
    if (c > m || s.chain_parent != (c == 0 ? 0 : hits[c - 1])) continue;
    const int end = std::min({std::min(static_cast<int>(s.cache_tokens.size()), s.prefill_target) / bs, max_blocks,
                              static_cast<int>(state.cache_tokens.size()) / bs});
    int k = c;
    while (k < end && std::equal(s.cache_tokens.begin() + k * bs, s.cache_tokens.begin() + (k + 1) * bs,
                                 state.cache_tokens.begin() + k * bs)) {
      ++k;
    }
    best = std::max(best, k - m);
  }
  return best;
}

// Caching requests: the cached blocks of each eligible group (Match) and
// the blocks a sequence there is prefilling now (InFlightBlocks). Where no
// group holds or computes any, the usual order among the groups that fit
// (most free blocks, then fewest sequences, then lowest index). Otherwise
// each group scores the prompt tokens it saves less its load (GroupLoad):
// the tokens it computes before this prompt's first token would be, less
// those of the prompt it skips. The best group that fits takes the request
// now, unless waiting for in-flight blocks scores higher: then it is held.
// Ties go to the usual order, and to admission now over waiting.
SchedulerImpl::Placement SchedulerImpl::Place(const RequestState& state, const std::vector<bool>& eligible,
                                              const std::vector<int64_t>& load) const {
  const int total = kv_.BlocksFor(state.AdmissionKvTokens());
  const Request& r = state.request;
  if (!options_.prefix_caching || state.cache_tokens.empty()) {
    return Placement{kv_.PickGroup(total, sequences_on_group_, eligible), {}, false};
  }
  const int64_t bs = kv_.BlockSize();
  // The last prompt token is always computed: it gives the first logits.
  const int max_blocks = std::min(static_cast<int>(state.cache_tokens.size()), state.prefill_target - 1) / kv_.BlockSize();
  struct Option {
    int group = -1;
    std::vector<uint64_t> hits;
    int in_flight = 0;
    bool fits = false;
  };
  std::vector<Option> options;
  bool any_gain = false;
  for (int g = 0; g < options_.dp_groups; ++g) {
    if (!eligible[g]) continue;
    Option o;
    o.group = g;
    o.hits = prefix_.Match(g, state.cache_tokens, r.cache_salt, max_blocks);
    o.in_flight = InFlightBlocks(g, state, o.hits, max_blocks);
    const int own = total - static_cast<int>(o.hits.size());
    o.fits = own <= Available(g) - prefix_.Unreferenced(g, o.hits);
    any_gain = any_gain || !o.hits.empty() || o.in_flight > 0;
    options.push_back(std::move(o));
  }
  const auto usual_before = [&](int a, int b) {
    return kv_.Free(a) > kv_.Free(b) ||
           (kv_.Free(a) == kv_.Free(b) && sequences_on_group_[a] < sequences_on_group_[b]);
  };
  const Option* now = nullptr;
  const Option* wait = nullptr;
  int64_t now_score = 0, wait_score = 0;
  for (const Option& o : options) {
    const int64_t score = any_gain ? static_cast<int64_t>(o.hits.size()) * bs - load[o.group] : 0;
    if (o.fits && (now == nullptr || score > now_score || (score == now_score && usual_before(o.group, now->group)))) {
      now = &o;
      now_score = score;
    }
    const int64_t waiting = score + o.in_flight * bs;
    if (o.in_flight > 0 && (wait == nullptr || waiting > wait_score)) {
      wait = &o;
      wait_score = waiting;
    }
  }
  if (wait != nullptr && (now == nullptr || wait_score > now_score)) return Placement{wait->group, {}, true};
  if (now == nullptr) return Placement{};
  return Placement{now->group, now->hits, false};
}

void SchedulerImpl::CountLookup(const RequestState& state, size_t hits) {
  if (!options_.prefix_caching || state.cache_tokens.empty()) return;
  prefix_stats_.queries += 1;
  prefix_stats_.query_tokens += static_cast<uint64_t>(state.prefill_target);
  prefix_stats_.hit_tokens += hits * static_cast<uint64_t>(kv_.BlockSize());
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

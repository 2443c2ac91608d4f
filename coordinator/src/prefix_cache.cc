// Cached KV blocks per attention-DP group (see prefix_cache.h).
#include "prefix_cache.h"

#include "absl/hash/hash.h"
#include "seam/core/status.h"

namespace seam::coordinator {

size_t PrefixCache::KeyHash::operator()(const Key& k) const {
  return absl::HashOf(k.parent, k.salt, k.tokens);
}

PrefixCache::PrefixCache(int dp_groups, int block_size) : block_size_(block_size), groups_(dp_groups) {}

std::vector<uint64_t> PrefixCache::Match(int group, const std::vector<int32_t>& tokens, const std::string& salt,
                                         int max_blocks) const {
  const Group& g = groups_[group];
  std::vector<uint64_t> out;
  Key key{0, salt, {}};
  const int full = static_cast<int>(tokens.size()) / block_size_;
  for (int b = 0; b < full && b < max_blocks; ++b) {
    key.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(b) * block_size_,
                      tokens.begin() + static_cast<std::ptrdiff_t>(b + 1) * block_size_);
    auto it = g.index.find(key);
    if (it == g.index.end()) break;
    out.push_back(it->second);
    key.parent = it->second;
  }
  return out;
}

int PrefixCache::Unreferenced(int group, const std::vector<uint64_t>& blocks) const {
  int n = 0;
  for (uint64_t id : blocks) n += groups_[group].blocks.at(id).refs == 0 ? 1 : 0;
  return n;
}

void PrefixCache::Acquire(int group, const std::vector<uint64_t>& blocks) {
  Group& g = groups_[group];
  for (uint64_t id : blocks) {
    Block& b = g.blocks.at(id);
    if (b.refs == 0) g.lru.erase(b.lru);
    b.refs += 1;
  }
}

void PrefixCache::Release(int group, const std::vector<uint64_t>& blocks) {
  Group& g = groups_[group];
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& b = g.blocks.at(*it);
    SEAM_CHECK_MSG(b.refs > 0, "releasing cached block ", *it, " of DP group ", group, ", which no one holds");
    b.refs -= 1;
    if (b.refs == 0) b.lru = g.lru.insert(g.lru.end(), *it);
  }
}

std::pair<uint64_t, bool> PrefixCache::Insert(int group, uint64_t parent, const int32_t* block_tokens,
                                              const std::string& salt) {
  Group& g = groups_[group];
  Key key{parent, salt, std::vector<int32_t>(block_tokens, block_tokens + block_size_)};
  auto it = g.index.find(key);
  if (it != g.index.end()) return {it->second, false};
  const uint64_t id = next_id_++;
  g.index.emplace(key, id);
  Block& b = g.blocks[id];
  b.key = std::move(key);
  b.refs = 1;
  return {id, true};
}

std::vector<uint64_t> PrefixCache::Evict(int group, int count) {
  Group& g = groups_[group];
  std::vector<uint64_t> out;
  while (static_cast<int>(out.size()) < count && !g.lru.empty()) {
    const uint64_t id = g.lru.front();
    g.lru.pop_front();
    auto b = g.blocks.find(id);
    g.index.erase(b->second.key);
    g.blocks.erase(b);
    out.push_back(id);
  }
  return out;
}

void PrefixCache::Clear() {
  for (Group& g : groups_) g = Group{};
}

}  // namespace seam::coordinator

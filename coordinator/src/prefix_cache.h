// PrefixCache: the coordinator's map of cached KV blocks, one per
// attention-DP group. A cached block holds one full block of prompt tokens;
// it is named by its chain (the cached block before it, 0 for a prompt's
// first block), its token ids and the request's cache salt, so a lookup
// matches only blocks whose whole prefix is equal, under the same salt.
// Blocks carry reference counts (the running sequences that map them);
// unreferenced blocks stay cached and are evicted least recently released
// first. Cached block ids are the coordinator's names, unique for the life
// of the object (never reused); every stage maps them to its own memory.
// Counts no free blocks: the scheduler's KvBudget counts a cached block as
// used until it is evicted. Not thread-safe (the scheduler's owner calls it).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seam::coordinator {

class PrefixCache {
 public:
  PrefixCache(int dp_groups, int block_size);

  // The cached blocks holding the first full blocks of `tokens` under `salt`
  // on `group`, in order, at most `max_blocks`; stops at the first miss.
  std::vector<uint64_t> Match(int group, const std::vector<int32_t>& tokens, const std::string& salt,
                              int max_blocks) const;
  // Of `blocks` (cached on `group`), those no sequence references.
  int Unreferenced(int group, const std::vector<uint64_t>& blocks) const;
  // Takes one reference on each of `blocks` (from Match).
  void Acquire(int group, const std::vector<uint64_t>& blocks);
  // Drops one reference on each of `blocks`; those left unreferenced become
  // evictable, the last of `blocks` first (a chain's tail goes before its head).
  void Release(int group, const std::vector<uint64_t>& blocks);
  // Caches the block of `block_tokens` (block_size of them) after `parent`
  // (0: a prompt's first block) under `salt`, with one reference. Returns
  // its id and true, or the id of the equal block already cached and false
  // (nothing changes then: no reference is taken).
  std::pair<uint64_t, bool> Insert(int group, uint64_t parent, const int32_t* block_tokens,
                                   const std::string& salt);
  // Forgets up to `count` unreferenced blocks of `group`, least recently
  // released first; returns their ids.
  std::vector<uint64_t> Evict(int group, int count);
  // Forgets every block (an epoch change: the stages dropped their KV).
  void Clear();

  int Cached(int group) const { return static_cast<int>(groups_[group].blocks.size()); }
  int Evictable(int group) const { return static_cast<int>(groups_[group].lru.size()); }
  int BlockSize() const { return block_size_; }

 private:
  struct Key {
    uint64_t parent = 0;
    std::string salt;
    std::vector<int32_t> tokens;
    bool operator==(const Key& o) const { return parent == o.parent && salt == o.salt && tokens == o.tokens; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Block {
    Key key;
    int refs = 0;
    std::list<uint64_t>::iterator lru;  // valid while refs == 0
  };
  struct Group {
    std::unordered_map<Key, uint64_t, KeyHash> index;
    std::unordered_map<uint64_t, Block> blocks;
    std::list<uint64_t> lru;  // unreferenced blocks, the next to evict first
  };

  int block_size_;
  uint64_t next_id_ = 1;
  std::vector<Group> groups_;
};

}  // namespace seam::coordinator

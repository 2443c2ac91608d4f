// KV block accounting of the scheduler: one pool of blocks per attention-DP
// group, sized by the stage with the fewest blocks. Counts only; every stage
// maps a sequence's blocks to its own memory.
#pragma once

#include <cstdint>
#include <vector>

namespace seam::coordinator {

class KvBudget {
 public:
  KvBudget(int dp_groups, int blocks_per_group, int block_size);

  // Blocks that hold `tokens` positions of KV (rounded up).
  int BlocksFor(int64_t tokens) const;
  int BlockSize() const { return block_size_; }
  int Capacity() const { return blocks_per_group_; }
  int Free(int group) const { return free_[group]; }
  int Groups() const { return static_cast<int>(free_.size()); }

  // Takes `blocks` from `group` when that many are free; false changes nothing.
  bool TryAllocate(int group, int blocks);
  // Returns blocks taken by TryAllocate.
  void Release(int group, int blocks);

  // The least-loaded group with at least `blocks` free among those `eligible`:
  // most free blocks, then fewest sequences (`sequences[g]`), then lowest
  // index. -1 when none fits.
  int PickGroup(int blocks, const std::vector<int>& sequences,
                const std::vector<bool>& eligible) const;

 private:
  int blocks_per_group_;
  int block_size_;
  std::vector<int> free_;
};

}  // namespace seam::coordinator

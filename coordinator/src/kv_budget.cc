// KV block pools per attention-DP group (see kv_budget.h).
#include "kv_budget.h"

#include "seam/core/status.h"

namespace seam::coordinator {

KvBudget::KvBudget(int dp_groups, int blocks_per_group, int block_size)
    : blocks_per_group_(blocks_per_group),
      block_size_(block_size),
      free_(dp_groups, blocks_per_group) {}

int KvBudget::BlocksFor(int64_t tokens) const {
  if (tokens <= 0) return 0;
  return static_cast<int>((tokens + block_size_ - 1) / block_size_);
}

bool KvBudget::TryAllocate(int group, int blocks) {
  SEAM_CHECK(blocks >= 0);
  if (free_[group] < blocks) return false;
  free_[group] -= blocks;
  return true;
}

void KvBudget::Release(int group, int blocks) {
  SEAM_CHECK_MSG(blocks >= 0 && free_[group] + blocks <= blocks_per_group_,
                 "releasing ", blocks, " blocks to DP group ", group, " with ", free_[group],
                 " of ", blocks_per_group_, " free");
  free_[group] += blocks;
}

int KvBudget::PickGroup(int blocks, const std::vector<int>& sequences,
                        const std::vector<bool>& eligible) const {
  int best = -1;
  for (int g = 0; g < Groups(); ++g) {
    if (!eligible[g] || free_[g] < blocks) continue;
    if (best < 0 || free_[g] > free_[best] ||
        (free_[g] == free_[best] && sequences[g] < sequences[best])) {
      best = g;
    }
  }
  return best;
}

}  // namespace seam::coordinator

// KvCache's cached blocks: sharing them into a new sequence, publishing a
// sequence's block under the coordinator's id, evicting (see kv_cache.h).
#include "absl/strings/str_cat.h"
#include "seam/models/kv_cache.h"

namespace seam::models {

void KvCache::Unref(int32_t block) {
  if (--refs_[block] == 0) free_.push_back(block);
}

absl::Status KvCache::Share(uint64_t sequence, const std::vector<uint64_t>& ids) {
  if (Has(sequence)) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV cache: sequence ", sequence, " maps cached blocks but already holds blocks"));
  }
  for (uint64_t id : ids) {
    if (cached_.count(id) == 0) {
      return absl::NotFoundError(
          absl::StrCat("KV cache: sequence ", sequence, " maps cached block ", id, ", which is not cached here"));
    }
  }
  std::vector<int32_t>& table = tables_[sequence];
  for (uint64_t id : ids) {
    const int32_t block = cached_.at(id);
    refs_[block] += 1;
    table.push_back(block);
  }
  return absl::OkStatus();
}

absl::Status KvCache::Publish(uint64_t sequence, int64_t index, uint64_t id) {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("KV cache: publishing block ", index, " of sequence ", sequence,
                                            ", which holds no blocks"));
  }
  if (index < 0 || index >= static_cast<int64_t>(it->second.size())) {
    return absl::OutOfRangeError(absl::StrCat("KV cache: publishing block ", index, " of sequence ", sequence,
                                              ", which holds ", it->second.size()));
  }
  if (cached_.count(id) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("KV cache: cached block ", id, " is published already"));
  }
  const int32_t block = it->second[index];
  refs_[block] += 1;
  cached_.emplace(id, block);
  return absl::OkStatus();
}

absl::Status KvCache::Evict(uint64_t id) {
  auto it = cached_.find(id);
  if (it == cached_.end()) {
    return absl::NotFoundError(absl::StrCat("KV cache: evicting cached block ", id, ", which is not cached"));
  }
  Unref(it->second);
  cached_.erase(it);
  return absl::OkStatus();
}

}  // namespace seam::models

#include "seam/models/mamba_state_cache.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::models {

int64_t MambaStateShape::BytesPerSequence() const {
  return layers * (conv_rows * conv_channels + heads * head_dim * state_size) * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<std::unique_ptr<MambaStateCache>> MambaStateCache::Create(const MambaStateShape& shape,
                                                                         int64_t slots, Device device) {
  if (shape.layers <= 0 || shape.conv_rows < 0 || shape.conv_channels <= 0 || shape.heads <= 0 ||
      shape.head_dim <= 0 || shape.state_size <= 0 || slots <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mamba state: layers (", shape.layers, "), conv channels (", shape.conv_channels, "), heads (", shape.heads,
        "), head_dim (", shape.head_dim, "), state size (", shape.state_size, ") and slots (", slots,
        ") must be positive"));
  }
  auto cache = std::unique_ptr<MambaStateCache>(new MambaStateCache());
  cache->slots_ = slots;
  cache->device_ = device;
  for (int64_t l = 0; l < shape.layers; ++l) {
    SEAM_ASSIGN_OR_RETURN(Tensor conv,
                          Tensor::TryEmpty({slots, shape.conv_rows, shape.conv_channels}, DType::kF32, device));
    SEAM_ASSIGN_OR_RETURN(
        Tensor ssm, Tensor::TryEmpty({slots, shape.heads, shape.head_dim, shape.state_size}, DType::kF32, device));
    cache->conv_.push_back(std::move(conv));
    cache->ssm_.push_back(std::move(ssm));
  }
  for (int64_t s = slots - 1; s >= 0; --s) cache->free_.push_back(static_cast<int32_t>(s));
  return cache;
}

int32_t MambaStateCache::SlotOf(uint64_t sequence) const {
  auto it = slot_of_.find(sequence);
  return it == slot_of_.end() ? -1 : it->second;
}

int64_t MambaStateCache::SlotsNeeded(const std::vector<uint64_t>& sequences) const {
  std::set<uint64_t> fresh;
  for (uint64_t s : sequences) {
    if (!Has(s)) fresh.insert(s);
  }
  return static_cast<int64_t>(fresh.size());
}

absl::Status MambaStateCache::Zero(int32_t slot) {
  for (size_t l = 0; l < conv_.size(); ++l) {
    for (const Tensor* t : {&conv_[l], &ssm_[l]}) {
      const Tensor row = t->Rows(slot, 1);
      SEAM_RETURN_IF_ERROR(CopyInto(Tensor::Zeros(row.shape(), DType::kF32, device_), row));
    }
  }
  return absl::OkStatus();
}

absl::Status MambaStateCache::Reserve(const std::vector<uint64_t>& sequences) {
  const int64_t needed = SlotsNeeded(sequences);
  if (needed > free_slots()) {
    return absl::ResourceExhaustedError(absl::StrCat("Mamba state full: the step needs ", needed,
                                                     " more sequence slots, ", free_slots(), " of ", slots_,
                                                     " are free"));
  }
  for (uint64_t s : sequences) {
    if (Has(s)) continue;
    const int32_t slot = free_.back();
    SEAM_RETURN_IF_ERROR(Zero(slot));
    free_.pop_back();
    slot_of_[s] = slot;
  }
  return absl::OkStatus();
}

void MambaStateCache::Free(uint64_t sequence) {
  auto it = slot_of_.find(sequence);
  if (it == slot_of_.end()) return;
  free_.push_back(it->second);
  slot_of_.erase(it);
}

}  // namespace seam::models

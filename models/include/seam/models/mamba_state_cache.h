// MambaStateCache: the recurrent state of one rank's Mamba2 layers, one slot
// per live sequence: for each layer a conv state [slots, K - 1, C] (the last
// inputs of the causal conv1d) and an SSM state [slots, H, P, N], both fp32,
// on the cache's device. A slot is taken, zeroed, when a sequence starts and
// returned when it is freed. Owned by the rank's KvCache, which sizes it
// from the same byte budget; one rank thread; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/tensor.h"

namespace seam::models {

// The per-sequence state of a rank's Mamba layers (all alike).
struct MambaStateShape {
  int64_t layers = 0;         // Mamba layers on this rank; 0: no state at all
  int64_t conv_rows = 0;      // conv_kernel - 1
  int64_t conv_channels = 0;  // this rank's x, B and C channels
  int64_t heads = 0, head_dim = 0, state_size = 0;  // this rank's heads; P; N
  int64_t BytesPerSequence() const;  // every layer's conv and SSM state, fp32
};

class MambaStateCache {
 public:
  // INVALID_ARGUMENT when a size is not positive.
  static absl::StatusOr<std::unique_ptr<MambaStateCache>> Create(const MambaStateShape& shape, int64_t slots,
                                                                 Device device);

  int64_t slots() const { return slots_; }
  int64_t free_slots() const { return static_cast<int64_t>(free_.size()); }
  const Tensor& conv(int64_t layer) const { return conv_[layer]; }
  const Tensor& ssm(int64_t layer) const { return ssm_[layer]; }

  bool Has(uint64_t sequence) const { return slot_of_.count(sequence) != 0; }
  // The slot of a sequence that has one, or -1.
  int32_t SlotOf(uint64_t sequence) const;
  // Slots still to take so every sequence of `sequences` has one.
  int64_t SlotsNeeded(const std::vector<uint64_t>& sequences) const;
  // Gives each sequence without a slot a zeroed one; all or nothing:
  // RESOURCE_EXHAUSTED "Mamba state full: the step needs N more sequence
  // slots, M of K are free".
  absl::Status Reserve(const std::vector<uint64_t>& sequences);
  // Returns a sequence's slot (nothing to do for one without).
  void Free(uint64_t sequence);

 private:
  MambaStateCache() = default;
  absl::Status Zero(int32_t slot);

  int64_t slots_ = 0;
  Device device_ = Device::CPU();
  std::vector<Tensor> conv_, ssm_;
  std::vector<int32_t> free_;  // a stack; lowest slots first
  std::map<uint64_t, int32_t> slot_of_;
};

}  // namespace seam::models

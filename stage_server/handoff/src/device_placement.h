// Where a device handoff's tensors sit in a slot: each tensor on the lane of
// its GPU, one after another from offset 0, each offset rounded up to 256
// bytes. The producer places, the consumer checks what a header claims.
// Internal to seam_handoff; pure (no CUDA), so tests run it on the host.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

inline constexpr uint64_t kSlotAlignment = 256;
inline constexpr int kMaxTensorsPerLane = 8;  // the kernel's spans per launch
// Each slot's allocation is slot_bytes plus this trailer, whose first word
// holds the producer's checksum of the slot's last handoff (written on the
// device, read by the consumer's kernel). Tensors never reach it.
inline constexpr uint64_t kSlotTrailerBytes = 256;

struct Placement {
  int lane = 0;
  uint64_t offset = 0;
};

// Places tensors (each contiguous, on one of `devices`' GPUs) in slots of
// `slot_bytes`. FAILED_PRECONDITION naming the tensor that does not fit
// (on no lane's GPU, not contiguous, past the slot, too many on a lane);
// INVALID_ARGUMENT for an empty or repeated name.
absl::StatusOr<std::vector<Placement>> PlaceInSlots(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                    const std::vector<int>& devices, uint64_t slot_bytes);

// Checks the placement a CUDA_IPC header claims: each tensor's lane below
// `lanes`, offset aligned, bytes within `slot_bytes`, at most
// kMaxTensorsPerLane a lane; the slot below `slots`.
// INVALID_ARGUMENT naming the field.
absl::Status CheckSlotPlacement(const v1::StreamState& header, int lanes, int slots, uint64_t slot_bytes);

}  // namespace seam::handoff

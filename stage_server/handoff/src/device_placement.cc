// Placing device handoff tensors in slots, and checking a header's claims
// (see device_placement.h).
#include "src/device_placement.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace seam::handoff {
namespace {

uint64_t AlignUp(uint64_t n) { return (n + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment; }

}  // namespace

absl::StatusOr<std::vector<Placement>> PlaceInSlots(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                    const std::vector<int>& devices, uint64_t slot_bytes) {
  std::vector<uint64_t> used(devices.size(), 0);
  std::vector<int> count(devices.size(), 0);
  std::set<std::string> names;
  std::vector<Placement> out;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) return absl::InvalidArgumentError("device handoff: a tensor has an empty name");
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("device handoff: tensor '", name, "' appears twice"));
    }
    const std::string what = absl::StrCat("device handoff: tensor '", name, "'");
    if (!t.defined() || !t.device().is_cuda()) {
      return absl::FailedPreconditionError(absl::StrCat(what, " is not on a GPU"));
    }
    const auto it = std::find(devices.begin(), devices.end(), t.device().index);
    if (it == devices.end()) {
      return absl::FailedPreconditionError(absl::StrCat(what, " is on GPU ", t.device().index, ", no lane's"));
    }
    if (!t.is_contiguous()) return absl::FailedPreconditionError(absl::StrCat(what, " is not contiguous"));
    const int lane = static_cast<int>(it - devices.begin());
    const uint64_t bytes = t.nbytes();
    if (++count[lane] > kMaxTensorsPerLane) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": more than ", kMaxTensorsPerLane, " tensors on lane ", lane));
    }
    if (bytes > slot_bytes || used[lane] > slot_bytes - bytes) {
      return absl::FailedPreconditionError(absl::StrCat(what, " (", bytes, " bytes at offset ", used[lane],
                                                        ") does not fit lane ", lane, "'s slot of ", slot_bytes,
                                                        " bytes"));
    }
    out.push_back(Placement{lane, used[lane]});
    used[lane] = AlignUp(used[lane] + bytes);
  }
  return out;
}

absl::Status CheckSlotPlacement(const v1::StreamState& header, int lanes, int slots, uint64_t slot_bytes) {
  const v1::DeviceSlot& slot = header.device_slot();
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (slot.slot() >= static_cast<uint32_t>(slots)) return bad("device_slot.slot: ", slot.slot(), " of ", slots);
  std::vector<int> count(static_cast<size_t>(lanes), 0);
  for (int i = 0; i < header.tensors_size(); ++i) {
    const v1::TensorDesc& t = header.tensors(i);
    const std::string what = absl::StrCat("tensors[", i, "] '", t.name(), "'");
    if (t.lane() >= static_cast<uint32_t>(lanes)) return bad(what, ": lane ", t.lane(), " of ", lanes);
    if (t.offset() % kSlotAlignment != 0) return bad(what, ": offset ", t.offset(), " is not 256-byte aligned");
    if (t.offset() > slot_bytes || t.byte_size() > slot_bytes - t.offset()) {
      return bad(what, ": bytes [", t.offset(), ", +", t.byte_size(), ") pass the slot's ", slot_bytes);
    }
    if (++count[t.lane()] > kMaxTensorsPerLane) {
      return bad(what, ": more than ", kMaxTensorsPerLane, " tensors on lane ", t.lane());
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::handoff

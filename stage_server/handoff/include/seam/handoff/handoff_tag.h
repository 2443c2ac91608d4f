// The UCX tag layout of pipeline handoffs, defined here and nowhere else.
//   bits 63..60  kind: 1 = StreamState header, 2 = tensor payload,
//                3 = DeviceLinkReply (consumer to producer of a device link)
//   bits 59..16  microbatch id, low 44 bits (the header carries the full id)
//   bits 15..0   tensor index within the handoff (0 for the header)
#pragma once

#include <cstddef>
#include <cstdint>

namespace seam::handoff {

enum class HandoffKind : uint64_t { kHeader = 1, kTensor = 2, kDeviceReply = 3 };

inline constexpr int kTagKindShift = 60;
inline constexpr int kTagMicrobatchShift = 16;
inline constexpr uint64_t kTagKindMask = uint64_t{0xF} << kTagKindShift;
inline constexpr uint64_t kTagMicrobatchBits = (uint64_t{1} << 44) - 1;
inline constexpr uint64_t kTagMicrobatchMask = kTagMicrobatchBits << kTagMicrobatchShift;
inline constexpr uint64_t kTagIndexMask = 0xFFFF;
inline constexpr uint64_t kTagMatchAll = ~uint64_t{0};
// Most tensors one handoff may carry (the index field's range).
inline constexpr size_t kMaxHandoffTensors = 0x10000;

constexpr uint64_t HandoffTag(HandoffKind kind, uint64_t microbatch_id, uint64_t index) {
  return (static_cast<uint64_t>(kind) << kTagKindShift) |
         ((microbatch_id & kTagMicrobatchBits) << kTagMicrobatchShift) | (index & kTagIndexMask);
}
constexpr uint64_t HeaderTag(uint64_t microbatch_id) { return HandoffTag(HandoffKind::kHeader, microbatch_id, 0); }
constexpr uint64_t TensorTag(uint64_t microbatch_id, uint64_t index) {
  return HandoffTag(HandoffKind::kTensor, microbatch_id, index);
}
// Replies of a device link carry no microbatch (their message names the slot).
constexpr uint64_t DeviceReplyTag() { return HandoffTag(HandoffKind::kDeviceReply, 0, 0); }
// The microbatch bits of a tag (the low 44 bits of the id).
constexpr uint64_t TagMicrobatch(uint64_t tag) { return (tag >> kTagMicrobatchShift) & kTagMicrobatchBits; }
constexpr uint64_t TagKind(uint64_t tag) { return tag >> kTagKindShift; }

}  // namespace seam::handoff

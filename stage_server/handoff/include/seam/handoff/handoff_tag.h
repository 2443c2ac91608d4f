// The UCX tag layout of pipeline handoffs, defined here and nowhere else.
//   bits 63..60  kind: 1 = StreamState header, 2 = tensor payload,
//                3 = DeviceLinkReply (consumer to producer of a device link)
//   bits 59..16  the link's tag: 44 bits derived from the epoch's handoff key
//                (LinkTagOf), the same on every message of the epoch; 0
//                without a key (tests of the keyless protocol)
//   bits 15..0   tensor index within the handoff (0 for headers and replies)
// A receive of the link matches only its own link tag, so a peer without the
// epoch's key cannot put a message where a receive takes it (one chance in
// 2^44 per guess); every other message on the worker is a stray, taken off
// the wire unread and counted (stray_drain.h). The microbatch id travels in
// the (MAC'd) header, never in a tag.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seam::handoff {

enum class HandoffKind : uint64_t { kHeader = 1, kTensor = 2, kDeviceReply = 3 };

inline constexpr int kTagKindShift = 60;
inline constexpr int kTagLinkShift = 16;
inline constexpr uint64_t kTagKindMask = uint64_t{0xF} << kTagKindShift;
inline constexpr uint64_t kTagLinkBits = (uint64_t{1} << 44) - 1;
inline constexpr uint64_t kTagLinkMask = kTagLinkBits << kTagLinkShift;
inline constexpr uint64_t kTagIndexMask = 0xFFFF;
inline constexpr uint64_t kTagMatchAll = ~uint64_t{0};
// Kind and link: the mask of a receive that takes any message of one kind of the link.
inline constexpr uint64_t kTagKindAndLinkMask = kTagKindMask | kTagLinkMask;
// Most tensors one handoff may carry (the index field's range).
inline constexpr size_t kMaxHandoffTensors = 0x10000;

// The link tag of an epoch: the low 44 bits of HMAC-SHA256(key, a fixed
// label); 0 for an empty key. INTERNAL if OpenSSL fails.
absl::StatusOr<uint64_t> LinkTagOf(absl::string_view handoff_key);

constexpr uint64_t HandoffTag(HandoffKind kind, uint64_t link, uint64_t index) {
  return (static_cast<uint64_t>(kind) << kTagKindShift) | ((link & kTagLinkBits) << kTagLinkShift) |
         (index & kTagIndexMask);
}
constexpr uint64_t HeaderTag(uint64_t link) { return HandoffTag(HandoffKind::kHeader, link, 0); }
constexpr uint64_t TensorTag(uint64_t link, uint64_t index) { return HandoffTag(HandoffKind::kTensor, link, index); }
constexpr uint64_t DeviceReplyTag(uint64_t link) { return HandoffTag(HandoffKind::kDeviceReply, link, 0); }
// The link bits of a tag.
constexpr uint64_t TagLink(uint64_t tag) { return (tag >> kTagLinkShift) & kTagLinkBits; }
constexpr uint64_t TagKind(uint64_t tag) { return tag >> kTagKindShift; }
constexpr bool IsHandoffKind(uint64_t kind) { return kind >= 1 && kind <= 3; }

}  // namespace seam::handoff

// Replies of a device link's consumer to its producer (DeviceLinkReply: the
// answer to an offer, slot releases) as they travel: sealed like headers
// (HMAC-SHA256 as the last field), under a key derived from the epoch's
// handoff key, so neither kind of message verifies as the other. Internal to
// seam_handoff; the checks are pure, for tests without processes.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

inline constexpr size_t kMaxReplyBytes = 4096;

// The key replies are sealed under: HMAC-SHA256(handoff key, a fixed label);
// "" for an empty handoff key (no MAC, tests of the keyless protocol only).
absl::StatusOr<std::string> ReplyKey(absl::string_view handoff_key);

// `reply` serialized and sealed under `reply_key` (from ReplyKey).
absl::StatusOr<std::string> SealReply(const v1::DeviceLinkReply& reply, absl::string_view reply_key);

// Checks wire bytes: OUT_OF_RANGE over kMaxReplyBytes; PERMISSION_DENIED
// without a MAC that verifies (when keyed); INVALID_ARGUMENT when they are
// not a DeviceLinkReply with an answer or a release.
absl::StatusOr<v1::DeviceLinkReply> CheckReply(absl::string_view wire, absl::string_view reply_key);

}  // namespace seam::handoff

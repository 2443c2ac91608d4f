// The MAC of a handoff header: HMAC-SHA256 under the epoch's handoff key over
// the header serialized with its `mac` field empty. On the wire the MAC is
// the header's last field, so the authenticated bytes are a prefix of the
// message. Internal to seam_handoff.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seam::handoff {

inline constexpr size_t kHeaderMacBytes = 32;  // SHA-256
// Wire bytes of `bytes mac = 11` holding a 32-byte MAC: key, length, MAC.
inline constexpr size_t kMacFieldBytes = 2 + kHeaderMacBytes;

// HMAC-SHA256 of `bytes` under `key` (non-empty). INTERNAL naming the
// OpenSSL call if OpenSSL fails.
absl::StatusOr<std::string> HeaderMac(absl::string_view key, absl::string_view bytes);

// `unsealed` (a StreamState serialized with `mac` empty) followed by its
// MAC field under `key`; `unsealed` unchanged when `key` is empty.
absl::StatusOr<std::string> SealHeaderBytes(std::string unsealed, absl::string_view key);

// Splits wire bytes into the MAC'd prefix and the MAC when they end with a
// MAC field; false when they do not.
bool SplitMacField(absl::string_view wire, absl::string_view* unsealed, absl::string_view* mac);

// Compares two MACs in time independent of where they differ.
bool MacEquals(absl::string_view a, absl::string_view b);

}  // namespace seam::handoff

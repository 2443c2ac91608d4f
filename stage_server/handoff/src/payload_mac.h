// The MAC of a keyed handoff's tensor payloads (TensorDesc.mac): Poly1305
// under a one-time key per tensor, ChaCha20's keystream block `index` under
// the payload key (HMAC-SHA256 of the epoch's handoff key and a fixed label)
// and the handoff's nonce (StreamState.payload_nonce, 12 random bytes drawn
// per handoff), as RFC 8439 derives its Poly1305 keys. A fresh nonce per
// handoff keeps every one-time key unique, which Poly1305 needs; the header's
// MAC covers the tags, so a payload verifies only beside its own header.
// Poly1305 runs at about the speed of the CRC-32C it replaces on keyed
// handoffs (docs/RELIABILITY.md has the measurement). Each object is used
// from one thread. Internal to seam_handoff.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seam::handoff {

inline constexpr size_t kPayloadNonceBytes = 12;
inline constexpr size_t kPayloadMacBytes = 16;

class PayloadMac {
 public:
  // The payload key of `handoff_key` (non-empty). INTERNAL if OpenSSL fails.
  static absl::StatusOr<PayloadMac> Create(absl::string_view handoff_key);
  PayloadMac(PayloadMac&&) noexcept;
  PayloadMac& operator=(PayloadMac&&) noexcept;
  ~PayloadMac();

  // A fresh nonce from OpenSSL's generator.
  static absl::StatusOr<std::string> NewNonce();

  // The 16-byte tag of payload `index` of the handoff with `nonce`.
  absl::StatusOr<std::string> Tag(absl::string_view nonce, uint32_t index, const void* data, size_t size);
  // OK when `tag` is that tag (compared in constant time); PERMISSION_DENIED
  // when it is not; INTERNAL if OpenSSL fails.
  absl::Status Verify(absl::string_view nonce, uint32_t index, const void* data, size_t size, absl::string_view tag);

 private:
  struct Contexts;
  explicit PayloadMac(std::unique_ptr<Contexts> contexts);
  std::unique_ptr<Contexts> contexts_;
};

}  // namespace seam::handoff

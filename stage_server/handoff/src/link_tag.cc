// The link tag of an epoch (handoff_tag.h): 44 bits of an HMAC of the
// epoch's handoff key, so only holders of the key can tag a message that a
// receive of the link matches.
#include "seam/handoff/handoff_tag.h"

#include <cstring>

#include "src/header_mac.h"

namespace seam::handoff {

absl::StatusOr<uint64_t> LinkTagOf(absl::string_view handoff_key) {
  if (handoff_key.empty()) return uint64_t{0};
  absl::StatusOr<std::string> mac = HeaderMac(handoff_key, "seam.v1 handoff link tag");
  if (!mac.ok()) return mac.status();
  uint64_t bits = 0;
  std::memcpy(&bits, mac->data(), sizeof(bits));
  return bits & kTagLinkBits;
}

}  // namespace seam::handoff

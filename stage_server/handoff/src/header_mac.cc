// HMAC-SHA256 of handoff headers through OpenSSL 3, and the MAC field's
// wire form (field 11 of seam.v1.StreamState, length-delimited).
#include "src/header_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <limits>

#include "src/openssl_check.h"

namespace seam::handoff {
namespace {

// Protobuf key of field 11 with wire type 2 (length-delimited): (11 << 3) | 2.
constexpr char kMacFieldKey = 0x5A;

}  // namespace

absl::StatusOr<std::string> HeaderMac(absl::string_view key, absl::string_view bytes) {
  if (key.empty() || key.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("handoff key of ", key.size(), " bytes"));
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  SEAM_OPENSSL_RETURN_IF_NULL(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                   reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), mac,
                                   &length));
  if (length != kHeaderMacBytes) {
    return absl::InternalError(absl::StrCat("HMAC-SHA256 gave ", length, " bytes, expected ", kHeaderMacBytes));
  }
  return std::string(reinterpret_cast<const char*>(mac), length);
}

absl::StatusOr<std::string> SealHeaderBytes(std::string unsealed, absl::string_view key) {
  if (key.empty()) return unsealed;
  absl::StatusOr<std::string> mac = HeaderMac(key, unsealed);
  if (!mac.ok()) return mac.status();
  unsealed.push_back(kMacFieldKey);
  unsealed.push_back(static_cast<char>(kHeaderMacBytes));
  unsealed.append(*mac);
  return unsealed;
}

bool SplitMacField(absl::string_view wire, absl::string_view* unsealed, absl::string_view* mac) {
  if (wire.size() < kMacFieldBytes) return false;
  const size_t at = wire.size() - kMacFieldBytes;
  if (wire[at] != kMacFieldKey || static_cast<unsigned char>(wire[at + 1]) != kHeaderMacBytes) return false;
  *unsealed = wire.substr(0, at);
  *mac = wire.substr(at + 2);
  return true;
}

bool MacEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace seam::handoff

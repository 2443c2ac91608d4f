// Poly1305 payload MACs with ChaCha20-derived one-time keys, through OpenSSL 3.
#include "src/payload_mac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/header_mac.h"
#include "src/openssl_check.h"

namespace seam::handoff {
namespace {

constexpr char kPayloadKeyLabel[] = "seam.v1 handoff payload key";
constexpr size_t kKeyBytes = 32;

// An OpenSSL call that returns 1 on success.
#define SEAM_OPENSSL_RETURN_IF_NOT_ONE(call)                              \
  do {                                                                    \
    if ((call) != 1) return OpenSslError(#call, __FILE__, __LINE__);      \
  } while (0)

}  // namespace

struct PayloadMac::Contexts {
  unsigned char key[kKeyBytes] = {};
  EVP_CIPHER_CTX* chacha = nullptr;
  EVP_MAC* poly1305 = nullptr;
  EVP_MAC_CTX* mac = nullptr;
  ~Contexts() {
    EVP_MAC_CTX_free(mac);
    EVP_MAC_free(poly1305);
    EVP_CIPHER_CTX_free(chacha);
    OPENSSL_cleanse(key, sizeof(key));
  }
};

PayloadMac::PayloadMac(std::unique_ptr<Contexts> contexts) : contexts_(std::move(contexts)) {}
PayloadMac::PayloadMac(PayloadMac&&) noexcept = default;
PayloadMac& PayloadMac::operator=(PayloadMac&&) noexcept = default;
PayloadMac::~PayloadMac() = default;

absl::StatusOr<PayloadMac> PayloadMac::Create(absl::string_view handoff_key) {
  absl::StatusOr<std::string> key = HeaderMac(handoff_key, kPayloadKeyLabel);
  if (!key.ok()) return key.status();
  auto c = std::make_unique<Contexts>();
  std::memcpy(c->key, key->data(), kKeyBytes);
  OPENSSL_cleanse(key->data(), key->size());
  SEAM_OPENSSL_RETURN_IF_NULL(c->chacha = EVP_CIPHER_CTX_new());
  SEAM_OPENSSL_RETURN_IF_NULL(c->poly1305 = EVP_MAC_fetch(nullptr, "POLY1305", nullptr));
  SEAM_OPENSSL_RETURN_IF_NULL(c->mac = EVP_MAC_CTX_new(c->poly1305));
  return PayloadMac(std::move(c));
}

absl::StatusOr<std::string> PayloadMac::NewNonce() {
  std::string nonce(kPayloadNonceBytes, '\0');
  SEAM_OPENSSL_RETURN_IF_NOT_ONE(
      RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())));
  return nonce;
}

absl::StatusOr<std::string> PayloadMac::Tag(absl::string_view nonce, uint32_t index, const void* data, size_t size) {
  if (nonce.size() != kPayloadNonceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload nonce of ", nonce.size(), " bytes, expected ", kPayloadNonceBytes));
  }
  Contexts& c = *contexts_;
  // ChaCha20's IV in OpenSSL: the block counter (32 bits, little-endian), then the 96-bit nonce.
  unsigned char iv[16];
  for (int i = 0; i < 4; ++i) iv[i] = static_cast<unsigned char>(index >> (8 * i));
  std::memcpy(iv + 4, nonce.data(), kPayloadNonceBytes);
  static const unsigned char kZeros[kKeyBytes] = {};
  unsigned char one_time[kKeyBytes];
  int written = 0;
  SEAM_OPENSSL_RETURN_IF_NOT_ONE(EVP_EncryptInit_ex(c.chacha, EVP_chacha20(), nullptr, c.key, iv));
  SEAM_OPENSSL_RETURN_IF_NOT_ONE(EVP_EncryptUpdate(c.chacha, one_time, &written, kZeros, sizeof(kZeros)));
  const int init = EVP_MAC_init(c.mac, one_time, sizeof(one_time), nullptr);
  OPENSSL_cleanse(one_time, sizeof(one_time));
  if (init != 1) return OpenSslError("EVP_MAC_init(Poly1305)", __FILE__, __LINE__);
  if (size > 0) {
    SEAM_OPENSSL_RETURN_IF_NOT_ONE(EVP_MAC_update(c.mac, static_cast<const unsigned char*>(data), size));
  }
  std::string tag(kPayloadMacBytes, '\0');
  size_t length = 0;
  SEAM_OPENSSL_RETURN_IF_NOT_ONE(
      EVP_MAC_final(c.mac, reinterpret_cast<unsigned char*>(tag.data()), &length, tag.size()));
  if (length != kPayloadMacBytes) {
    return absl::InternalError(absl::StrCat("Poly1305 gave ", length, " bytes, expected ", kPayloadMacBytes));
  }
  return tag;
}

absl::Status PayloadMac::Verify(absl::string_view nonce, uint32_t index, const void* data, size_t size,
                                absl::string_view tag) {
  absl::StatusOr<std::string> expected = Tag(nonce, index, data, size);
  if (!expected.ok()) return expected.status();
  if (!MacEquals(tag, *expected)) return absl::PermissionDeniedError("payload MAC does not verify");
  return absl::OkStatus();
}

}  // namespace seam::handoff

// Loopback detection for listen and target addresses.
#include "seam/security/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace seam::security {

std::string HostOfAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return std::string(address);
  }
  if (absl::StartsWith(address, "dns:///")) address.remove_prefix(7);
  if (absl::StartsWith(address, "ipv4:") || absl::StartsWith(address, "ipv6:")) address.remove_prefix(5);
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return std::string(close == absl::string_view::npos ? address.substr(1) : address.substr(1, close - 1));
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return std::string(address);
  // A bare IPv6 address ("::1") has more than one colon and no port.
  if (address.find(':') != colon) {
    in6_addr v6;
    if (inet_pton(AF_INET6, std::string(address).c_str(), &v6) == 1) return std::string(address);
  }
  return std::string(address.substr(0, colon));
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::StartsWith(host, "unix:") || absl::StartsWith(host, "unix-abstract:")) return true;
  const std::string h = absl::AsciiStrToLower(host);
  if (h == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool IsLoopbackAddress(absl::string_view address) { return IsLoopbackHost(HostOfAddress(address)); }

absl::Status CheckPlaintextListen(absl::string_view address, bool insecure) {
  if (insecure || IsLoopbackAddress(address)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to listen on ", address,
      " without TLS: anyone who reaches the port could drive or stop the server. Pass --tls-cert and --tls-key, "
      "listen on a loopback address (127.0.0.1, ::1, localhost), or pass --insecure to accept plaintext"));
}

}  // namespace seam::security

// Where plaintext gRPC is allowed: on loopback only, unless the operator says
// --insecure. Every seam server asks CheckPlaintextListen before it listens
// without TLS; a refusal is the operator's to fix (exit 2).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seam::security {

// The host part of a gRPC address: "127.0.0.1:0" -> "127.0.0.1",
// "[::1]:50051" -> "::1", "localhost:5" -> "localhost", "dns:///h:1" -> "h";
// "" for ":50051" (every interface).
std::string HostOfAddress(absl::string_view address);

// 127.0.0.0/8, ::1 (also as an IPv4-mapped 127.x address), "localhost", and
// unix-domain socket addresses ("unix:..."). Every other host, including ""
// and 0.0.0.0 / :: (every interface), is not loopback.
bool IsLoopbackHost(absl::string_view host);
bool IsLoopbackAddress(absl::string_view address);  // HostOfAddress, then IsLoopbackHost

// OK when `address` is loopback or `insecure` is set. Otherwise
// FAILED_PRECONDITION: "refusing to listen on <address> without TLS: ...",
// naming the three ways out (--tls-cert/--tls-key, a loopback address,
// --insecure).
absl::Status CheckPlaintextListen(absl::string_view address, bool insecure);

}  // namespace seam::security

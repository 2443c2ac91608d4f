// One server per port: every seam listener binds its port exclusively, so a
// second process on a taken port fails at start instead of sharing it (with
// SO_REUSEPORT the kernel would split the traffic between the two). gRPC
// sets SO_REUSEPORT unless told not to, hence ListenExclusively on every
// seam ServerBuilder; the HTTP listeners create their socket with
// ListenTcp. A taken port is reported as "address already in use" with the
// port, the same for both.
#pragma once

#include <string>

#include <grpcpp/server_builder.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seam::security {

// Tells gRPC not to set SO_REUSEPORT on the builder's listening sockets.
void ListenExclusively(grpc::ServerBuilder& builder);

// A listening TCP socket on HOST:PORT ("" or 0.0.0.0: every IPv4
// interface; [::]: every interface; a name is resolved), bound without
// SO_REUSEPORT, with `backlog` pending connections. The socket's fd and the
// port it got (port 0 picks one). INVALID_ARGUMENT for an address that is
// not HOST:PORT or does not resolve; UNAVAILABLE naming the address, the
// port and the reason ("address already in use") when it cannot be bound.
struct ListeningSocket {
  int fd = -1;
  int port = 0;
};
absl::StatusOr<ListeningSocket> ListenTcp(const std::string& address, int backlog);

// Whether `address` can be listened on now (`what` names it: "--listen"):
// binds a probe socket there and closes it. OK when it could; otherwise
// UNAVAILABLE "cannot listen on <address>: address already in use (port N)
// (<what>)" for a taken port, and the reason the probe met otherwise. A
// server checks its ports this way before it touches anything else (a
// coordinator before it adopts the stages).
absl::Status CheckCanListen(const std::string& address, absl::string_view what);

// Why a server could not listen on `address`: CheckCanListen's reason, or
// UNAVAILABLE "cannot listen on <address> (<what>)" when the probe could.
absl::Status ListenFailure(const std::string& address, absl::string_view what);

}  // namespace seam::security

// Exclusive listening sockets and the diagnosis of a failed listen.
#include "seam/security/listen_port.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "seam/security/listen_address.h"

namespace seam::security {
namespace {

absl::Status SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", address, "' is not HOST:PORT"));
  }
  *host = HostOfAddress(address);
  if (*host == "0.0.0.0") host->clear();
  return absl::OkStatus();
}

// Binds and listens; `errno_out` holds the failing call's errno.
int BindAndListen(const addrinfo& a, int backlog, int* errno_out) {
  const int fd = socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) {
    *errno_out = errno;
    return -1;
  }
  // SO_REUSEADDR lets a restarted server take its port out of TIME_WAIT; on
  // Linux it never lets two sockets listen on one port. No SO_REUSEPORT.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (a.ai_family == AF_INET6) {
    const int zero = 0;  // [::] takes IPv4 too
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (bind(fd, a.ai_addr, a.ai_addrlen) != 0 || listen(fd, backlog) != 0) {
    *errno_out = errno;
    close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return -1;
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace

void ListenExclusively(grpc::ServerBuilder& builder) { builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0); }

absl::StatusOr<ListeningSocket> ListenTcp(const std::string& address, int backlog) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(address, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", address, "': host '", host, "' does not resolve: ", gai_strerror(rc)));
  }
  int error = 0, fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) fd = BindAndListen(*a, backlog, &error);
  freeaddrinfo(found);
  if (fd < 0) {
    const char* reason = error == EADDRINUSE ? "address already in use" : std::strerror(error);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", reason, " (port ", port, ")"));
  }
  return ListeningSocket{fd, BoundPort(fd)};
}

absl::Status CheckCanListen(const std::string& address, absl::string_view what) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) return absl::OkStatus();
  absl::StatusOr<ListeningSocket> probe = ListenTcp(address, 1);
  if (probe.ok()) {
    close(probe->fd);
    return absl::OkStatus();
  }
  return absl::Status(probe.status().code(), absl::StrCat(probe.status().message(), " (", what, ")"));
}

absl::Status ListenFailure(const std::string& address, absl::string_view what) {
  absl::Status why = CheckCanListen(address, what);
  if (!why.ok()) return why;
  return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " (", what, ")"));
}

}  // namespace seam::security

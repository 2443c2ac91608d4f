// Server: the listening socket, TLS files, libmicrohttpd's daemon and its
// connection callbacks, the worker pool, and the order of a clean stop.
#include "seam/http_server/http_server.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "exchange.h"
#include "seam/core/logging.h"
#include "seam/security/listen_port.h"
#include "seam/security/secret_files.h"
#include "server_impl.h"

namespace seam::http_server {
namespace {

unsigned Seconds(absl::Duration d) { return static_cast<unsigned>(std::max<int64_t>(1, absl::ToInt64Seconds(d))); }

void LogMhd(void*, const char* format, va_list args) {
  char text[512];
  std::vsnprintf(text, sizeof(text), format, args);
  std::string line = text;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  SEAM_LOG_DEBUG("libmicrohttpd: {}", line);
}

void OnConnection(void* server, MHD_Connection* connection, void**, MHD_ConnectionNotificationCode code) {
  HeadDeadlines& heads = *static_cast<Server::Impl*>(server)->heads;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) return heads.Closed(connection);
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info != nullptr) heads.Started(connection, info->connect_fd);
}

absl::Status ReadTls(Server::Impl& impl) {
  const ServerOptions& o = impl.options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(o.name, ": TLS needs both a certificate and its key"));
  }
  if (o.tls_cert_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(o.name, ": a client CA needs a certificate and key"));
    }
    return absl::OkStatus();
  }
  const std::pair<const std::string*, std::string*> files[] = {
      {&o.tls_cert_file, &impl.cert_pem}, {&o.tls_key_file, &impl.key_pem}, {&o.tls_client_ca_file, &impl.client_ca_pem}};
  for (const auto& [path, text] : files) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> read = security::ReadFileForFlag(*path, o.name);
    if (!read.ok()) return absl::InvalidArgumentError(read.status().message());
    *text = *std::move(read);
  }
  return absl::OkStatus();
}

absl::Status StartDaemon(Server::Impl& impl) {
  const ServerOptions& o = impl.options;
  const bool tls = !impl.cert_pem.empty();
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (tls) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, impl.listen_fd, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(o.max_connections), nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<intptr_t>(o.max_connections_per_address), nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(Seconds(o.head_timeout)), nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Exchange::OnCompleted), &impl},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&OnConnection), &impl},
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&LogMhd), nullptr},
  };
  if (o.io_threads > 1) items.push_back({MHD_OPTION_THREAD_POOL_SIZE, o.io_threads, nullptr});
  if (tls) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(impl.cert_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(impl.key_pem.c_str())});
    if (!impl.client_ca_pem.empty()) {
      items.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, const_cast<char*>(impl.client_ca_pem.c_str())});
    }
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  impl.daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Exchange::OnAccess, &impl, MHD_OPTION_ARRAY,
                                 items.data(), MHD_OPTION_END);
  if (impl.daemon == nullptr) {
    return tls ? absl::InvalidArgumentError(absl::StrCat(o.name, ": cannot serve HTTPS with certificate ",
                                                         o.tls_cert_file, " and key ", o.tls_key_file))
               : absl::InternalError(absl::StrCat(o.name, ": libmicrohttpd did not start"));
  }
  return absl::OkStatus();
}

}  // namespace

const Route* Server::Impl::Find(const std::string& method, const std::string& path, bool* path_known) const {
  *path_known = false;
  for (const Route& r : routes) {
    const bool prefix = !r.path.empty() && r.path.back() == '*';
    if (prefix ? path.size() < r.path.size() || path.compare(0, r.path.size() - 1, r.path, 0, r.path.size() - 1) != 0
               : r.path != path) {
      continue;
    }
    *path_known = true;
    if (r.method == method) return &r;
  }
  return nullptr;
}

Response Server::Impl::ErrorAnswer(int status, const std::string& message) const {
  Response r;
  r.status = status;
  if (options.error_answer) {
    options.error_answer(message, r);
    r.status = status;
  } else {
    r.set_content(message + "\n", "text/plain; charset=utf-8");
  }
  return r;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options, std::vector<Route> routes) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->routes = std::move(routes);
  if (absl::Status s = ReadTls(*impl); !s.ok()) return s;
  absl::StatusOr<security::ListeningSocket> socket =
      security::ListenTcp(impl->options.listen, impl->options.listen_backlog);
  if (!socket.ok()) {
    return absl::Status(socket.status().code(), absl::StrCat(socket.status().message(), " (", impl->options.name, ")"));
  }
  impl->listen_fd = socket->fd;
  impl->port = socket->port;
  impl->heads = std::make_unique<HeadDeadlines>(impl->options.head_timeout);
  impl->workers = std::make_unique<WorkerPool>(impl->options.workers);
  if (absl::Status s = StartDaemon(*impl); !s.ok()) {
    close(impl->listen_fd);
    return s;
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->port; }

void Server::Stop() {
  Impl& impl = *impl_;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    if (impl.stopped) return;
    impl.stopped = true;
  }
  impl.stopping = true;
  const MHD_socket listening = MHD_quiesce_daemon(impl.daemon);  // no new connections
  std::vector<std::shared_ptr<Exchange>> live;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    live.assign(impl.live.begin(), impl.live.end());
  }
  for (const auto& e : live) e->Abandon();  // streamed answers end
  impl.workers->Join();                     // handlers return (their callers ended what they wait on)
  for (const auto& e : live) e->ResumeForStop();
  MHD_stop_daemon(impl.daemon);
  impl.daemon = nullptr;
  if (listening != MHD_INVALID_SOCKET) close(listening);
  impl.heads.reset();
}

}  // namespace seam::http_server

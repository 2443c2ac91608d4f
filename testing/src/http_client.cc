// The tests' raw HTTP client (http_client.h).
#include "seam/testing/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace seam::testing {
namespace {

absl::StatusOr<int> ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    const int e = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", std::strerror(e)));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

std::string SslError() {
  char text[256] = "no OpenSSL error queued";
  if (const unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, text, sizeof(text));
  ERR_clear_error();
  return text;
}

// Where the head ends ("\r\n\r\n"), or npos.
size_t HeadEnd(const std::string& b) { return b.find("\r\n\r\n"); }

}  // namespace

absl::StatusOr<std::unique_ptr<HttpConnection>> HttpConnection::OpenIdle(int port) {
  absl::StatusOr<int> fd = ConnectTcp(port);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<HttpConnection> c(new HttpConnection());
  c->fd_ = *fd;
  return c;
}

absl::StatusOr<std::unique_ptr<HttpConnection>> HttpConnection::Open(int port, const HttpClientOptions& options,
                                                                     absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<HttpConnection>> c = OpenIdle(port);
  if (!c.ok() || !options.tls) return c;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  (*c)->ssl_ctx_ = ctx;
  if (!options.ca_file.empty()) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("CA ", options.ca_file, ": ", SslError()));
    }
  }
  if (!options.client_cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx, options.client_cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx, options.client_key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("client certificate: ", SslError()));
  }
  SSL* ssl = SSL_new(ctx);
  (*c)->ssl_ = ssl;
  SSL_set_fd(ssl, (*c)->fd_);
  timeval tv{static_cast<time_t>(absl::ToInt64Seconds(timeout)), 0};
  setsockopt((*c)->fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (SSL_connect(ssl) != 1) return absl::UnavailableError(absl::StrCat("TLS handshake: ", SslError()));
  return c;
}

HttpConnection::~HttpConnection() {
  if (ssl_ != nullptr) SSL_free(static_cast<SSL*>(ssl_));
  if (ssl_ctx_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
  if (fd_ >= 0) close(fd_);
}

absl::Status HttpConnection::Send(absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ssl_ != nullptr ? SSL_write(static_cast<SSL*>(ssl_), bytes.data(), static_cast<int>(bytes.size()))
                                      : ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", ssl_ ? SslError() : std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

bool HttpConnection::Fill(absl::Time deadline) {
  char chunk[65536];
  for (;;) {
    if (ssl_ == nullptr || SSL_pending(static_cast<SSL*>(ssl_)) == 0) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (ready == 0) continue;
      if (ready < 0) return false;
    }
    const ssize_t n = ssl_ != nullptr ? SSL_read(static_cast<SSL*>(ssl_), chunk, sizeof(chunk))
                                      : ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

absl::StatusOr<HttpAnswer> HttpConnection::Read(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (HeadEnd(buffer_) == std::string::npos) {
    if (!Fill(deadline)) return absl::UnavailableError(absl::StrCat("no whole answer head; got '", buffer_, "'"));
  }
  const size_t head_end = HeadEnd(buffer_);
  std::vector<std::string> lines = absl::StrSplit(buffer_.substr(0, head_end), "\r\n");
  buffer_.erase(0, head_end + 4);
  HttpAnswer answer;
  std::vector<std::string> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status.size() < 2 || !absl::SimpleAtoi(status[1], &answer.status)) {
    return absl::DataLossError(absl::StrCat("status line '", lines[0], "'"));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    answer.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  if (auto it = answer.headers.find("transfer-encoding"); it != answer.headers.end() && it->second == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = buffer_.find("\r\n")) == std::string::npos) {
        if (!Fill(deadline)) return absl::UnavailableError("chunked answer cut off");
      }
      size_t size = 0;
      if (!absl::SimpleHexAtoi(buffer_.substr(0, eol), &size)) return absl::DataLossError("bad chunk size");
      while (buffer_.size() < eol + 2 + size + 2) {
        if (!Fill(deadline)) return absl::UnavailableError("chunked answer cut off");
      }
      answer.body.append(buffer_, eol + 2, size);
      buffer_.erase(0, eol + 2 + size + 2);
      if (size == 0) return answer;
    }
  }
  size_t length = 0;
  if (auto it = answer.headers.find("content-length"); it != answer.headers.end()) {
    if (!absl::SimpleAtoi(it->second, &length)) return absl::DataLossError("bad Content-Length");
    while (buffer_.size() < length) {
      if (!Fill(deadline)) return absl::UnavailableError("answer body cut off");
    }
    answer.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return answer;
  }
  while (Fill(deadline)) {
  }
  answer.body = std::move(buffer_);
  buffer_.clear();
  return answer;
}

bool HttpConnection::ClosedWithin(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, 50);
    if (ready < 0) return true;
    if (ready == 0) continue;
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK);
    if (n <= 0) return true;
    if (ssl_ == nullptr) ::recv(fd_, &byte, 1, 0);  // plain bytes: take them and watch on
    else return false;  // TLS data (an alert comes as data): not a close by itself
  }
  return false;
}

std::string HttpRequestBytes(const std::string& method, const std::string& path,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body) {
  std::string out = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  if (!body.empty() || method == "POST") absl::StrAppend(&out, "Content-Length: ", body.size(), "\r\n");
  absl::StrAppend(&out, "\r\n", body);
  return out;
}

absl::StatusOr<HttpAnswer> HttpCall(int port, const std::string& method, const std::string& path,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    const std::string& body, const HttpClientOptions& options,
                                    absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<HttpConnection>> c = HttpConnection::Open(port, options, timeout);
  if (!c.ok()) return c.status();
  if (absl::Status s = (*c)->Send(HttpRequestBytes(method, path, headers, body)); !s.ok()) return s;
  return (*c)->Read(timeout);
}

}  // namespace seam::testing

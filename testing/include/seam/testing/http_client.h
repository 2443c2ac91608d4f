// A raw HTTP/1.1 client for tests over real sockets: plain TCP or TLS
// (OpenSSL), sending bytes exactly as given (so a test can send a chunked
// body, a head one byte at a time, or nothing at all) and reading one answer
// (its body by Content-Length, chunked, or up to the close).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace seam::testing {

struct HttpAnswer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct HttpClientOptions {
  bool tls = false;
  std::string ca_file;           // with TLS: verify the server against it ("": no verification)
  std::string client_cert_file;  // with TLS: present this certificate and key
  std::string client_key_file;
};

class HttpConnection {
 public:
  // Connects to 127.0.0.1:`port` (and completes the TLS handshake).
  static absl::StatusOr<std::unique_ptr<HttpConnection>> Open(int port, const HttpClientOptions& options = {},
                                                              absl::Duration timeout = absl::Seconds(10));
  ~HttpConnection();
  // Connects without a TLS handshake or a byte sent: an idle client.
  static absl::StatusOr<std::unique_ptr<HttpConnection>> OpenIdle(int port);

  absl::Status Send(absl::string_view bytes);
  // One answer, within `timeout`.
  absl::StatusOr<HttpAnswer> Read(absl::Duration timeout);
  // True when the server closes the connection (or resets it) within `timeout`.
  bool ClosedWithin(absl::Duration timeout);

 private:
  HttpConnection() = default;
  // Some bytes, appended to buffer_; false on EOF, an error or the deadline.
  bool Fill(absl::Time deadline);
  int fd_ = -1;
  void* ssl_ctx_ = nullptr;  // SSL_CTX*
  void* ssl_ = nullptr;      // SSL*
  std::string buffer_;
};

// "METHOD path HTTP/1.1" with Host, Content-Length (when there is a body),
// Connection: close and `headers`, then the body.
std::string HttpRequestBytes(const std::string& method, const std::string& path,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body);

// One request on a new connection and its answer.
absl::StatusOr<HttpAnswer> HttpCall(int port, const std::string& method, const std::string& path,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    const std::string& body, const HttpClientOptions& options = {},
                                    absl::Duration timeout = absl::Seconds(30));

}  // namespace seam::testing

// seam's HTTP listener (the OpenAI-compatible front end, /metrics): HTTP/1.1
// on libmicrohttpd's event loops (epoll, a small pool of I/O threads), with
// handlers on a pool of worker threads of its own. A connection holds a
// worker only once its request is whole and let through: accepting, the TLS
// handshake, reading the head and the body and writing the answer happen on
// the event loops, so idle or slow clients cost a socket, never a worker.
// Bounds, each from ServerOptions: connections in all and per client
// address; a deadline from accept to the end of the first request head (TLS
// handshake included); an inactivity timeout while a body or an answer is in
// flight; the body size, for every transfer encoding, checked before a byte
// is buffered (a declared length over it is refused 413 at once; a chunked
// body that grows past it is refused 413 without keeping its bytes); the
// gate (authentication) runs on the head, before any body byte is read.
// The listening socket is bound exclusively (no SO_REUSEPORT): a taken port
// fails Start with "address already in use". Thread-safe; Stop (or the
// destructor) joins everything.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/http_server/http_message.h"

namespace seam::http_server {

using Handler = std::function<void(const Request& request, Response& response)>;

struct Route {
  std::string method;  // "GET", "POST"
  std::string path;    // matched exactly; "/a/*": every path "/a/" and at least one more character
  Handler handler;
};

struct ServerOptions {
  std::string listen;          // HOST:PORT; port 0 picks a free one
  std::string name = "HTTP";   // names the listener in messages, e.g. "--http-listen"
  // HTTPS when set (PEM files, both or neither). With a client CA, a client
  // must present a certificate it signed (checked before the gate).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  size_t max_body_bytes = 8 << 20;
  int workers = 32;     // handlers running at once (a streamed answer holds one while it streams)
  int io_threads = 2;   // event loops
  unsigned max_connections = 1024;
  unsigned max_connections_per_address = 256;
  int listen_backlog = 1024;
  // From accept to the end of the first request head, TLS handshake
  // included; also how long a kept-alive connection may idle.
  absl::Duration head_timeout = absl::Seconds(10);
  // Longest silence while a body arrives or an answer leaves.
  absl::Duration transfer_timeout = absl::Seconds(30);
  // Bytes of a streamed answer written and not yet taken by the client,
  // past which DataSink::write waits.
  size_t max_stream_buffer_bytes = 1 << 20;
  // Runs on an event loop with the request head (body empty), before any
  // body byte is read: false refuses the request with `refusal`, sent at
  // once, the body never read. Must not block.
  std::function<bool(const Request& head, Response& refusal)> gate;
  // The answer to a request the server refuses itself (no route: 404, body
  // too large: 413, a handler that threw: 500, shutting down: 503): fills
  // `response` (status already set) from `message`. Unset: plain text.
  std::function<void(const std::string& message, Response& response)> error_answer;
};

class Server {
 public:
  // Binds, then serves. INVALID_ARGUMENT for a listen address that is not
  // HOST:PORT or TLS files that cannot be used; UNAVAILABLE when the
  // address cannot be bound, naming the address and the reason ("address
  // already in use").
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options, std::vector<Route> routes);
  ~Server();  // Stop()

  int port() const;
  // Stops taking connections, ends streamed answers (their sinks report the
  // client gone), waits for the handlers running (they must return: shut
  // down what they wait on first), then closes every connection. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::http_server

// One HTTP exchange as a handler sees it: the request (head and whole body,
// already bounded by the server) and the response it fills in, whole or
// streamed through a DataSink (chunked transfer encoding) from the handler's
// worker thread. The names follow cpp-httplib's, which seam used before.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace seam::http_server {

struct Request {
  std::string method;   // "GET", "POST", ...
  std::string path;     // without the query string
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string body;     // at most ServerOptions::max_body_bytes
  std::string remote_address;  // the client's IP address

  // The first header named `name` (compared without case); "" when absent.
  std::string get_header_value(const std::string& name) const;
  bool has_header(const std::string& name) const;
};

// Where a streamed answer's bytes go. Called from the handler's worker
// thread only; `write` blocks while the client has not taken the bytes
// already written (at most ServerOptions::max_stream_buffer_bytes wait).
struct DataSink {
  std::function<bool(const char* data, size_t size)> write;  // false once the client is gone
  std::function<void()> done;                                 // the answer is complete
  std::function<bool()> is_writable;                          // false once the client is gone
};

// Called again and again (on the handler's worker thread) until it calls
// sink.done() (the answer ends) or returns false (the answer is cut off and
// the connection closed). `offset`: the bytes written so far.
using ContentProvider = std::function<bool(size_t offset, DataSink& sink)>;
// Called once the streamed answer ended: `success` when it was done and the
// client took it all.
using ContentProviderReleaser = std::function<void(bool success)>;

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type;
  ContentProvider provider;  // set: a streamed answer (body unused)
  ContentProviderReleaser releaser;

  void set_header(const std::string& name, const std::string& value) { headers.emplace_back(name, value); }
  void set_content(std::string content, const std::string& type) {
    body = std::move(content);
    content_type = type;
  }
  void set_chunked_content_provider(const std::string& type, ContentProvider content,
                                    ContentProviderReleaser done = nullptr) {
    content_type = type;
    provider = std::move(content);
    releaser = std::move(done);
  }
};

}  // namespace seam::http_server

// The deadline from accept to the end of a connection's first request head
// (TLS handshake included): a connection that has not sent a whole head by
// then has its socket shut down, which its event loop sees as the client
// gone. libmicrohttpd's own timeout is one of inactivity only, which a
// client that sends a byte now and then never meets. Thread-safe; owns one
// thread. Internal to seam_http_server.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace seam::http_server {

class HeadDeadlines {
 public:
  explicit HeadDeadlines(absl::Duration timeout);
  ~HeadDeadlines();  // stops the thread

  // A connection (any key unique while it lives) began on socket `fd`.
  void Started(const void* connection, int fd);
  // Its first request head is whole: no deadline any more.
  void HeadSeen(const void* connection);
  // It is closing: forgotten (before its socket is closed).
  void Closed(const void* connection);
  // Connections cut by the deadline so far.
  uint64_t cut() const;

 private:
  void Loop();
  struct Entry {
    int fd = -1;
    absl::Time deadline;
  };
  const absl::Duration timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<const void*, Entry> waiting_;  // connections without a whole head yet
  uint64_t cut_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace seam::http_server

// Cutting connections whose first request head is late (head_deadlines.h).
#include "head_deadlines.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "absl/time/clock.h"

namespace seam::http_server {

HeadDeadlines::HeadDeadlines(absl::Duration timeout) : timeout_(timeout), thread_([this] { Loop(); }) {}

HeadDeadlines::~HeadDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HeadDeadlines::Started(const void* connection, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_[connection] = Entry{fd, absl::Now() + timeout_};
}

void HeadDeadlines::HeadSeen(const void* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.erase(connection);
}

void HeadDeadlines::Closed(const void* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.erase(connection);
}

uint64_t HeadDeadlines::cut() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cut_;
}

void HeadDeadlines::Loop() {
  // A tenth of the timeout (at least 50 ms): a late head is cut within 110% of it.
  const auto tick = std::chrono::milliseconds(std::max<int64_t>(50, absl::ToInt64Milliseconds(timeout_) / 10));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const absl::Time now = absl::Now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      // The socket is still open: Closed() comes before it is closed, under this lock.
      shutdown(it->second.fd, SHUT_RDWR);
      ++cut_;
      it = waiting_.erase(it);
    }
    cv_.wait_for(lock, tick);
  }
}

}  // namespace seam::http_server

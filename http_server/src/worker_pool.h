// A fixed pool of threads running posted tasks in order of posting; Join
// runs what is queued, then stops the threads. Internal to seam_http_server.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace seam::http_server {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();  // Join()
  void Post(std::function<void()> task);
  void Join();

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace seam::http_server

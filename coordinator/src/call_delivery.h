// CallDelivery: the threads that hand calls their tokens and ends, so that
// the driver thread only schedules. A client write (a gRPC stream message,
// an HTTP chunk's wake-up, the request metrics) costs microseconds, and a
// microbatch of hundreds of sequences made the driver spend milliseconds
// there between a stage's answer and the next microbatch; queued here, that
// work runs while the stages compute.
//
// Contract: every callback queued for one key (a call) runs on one lane
// thread, in the order it was queued; keys spread over the lanes. Queue and
// Flush come from one thread (the driver's); a queued callback becomes
// runnable at the next Flush. Drain runs everything queued so far and stops
// the lanes; later Queue calls run inline. Internal to the coordinator.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace seam::coordinator {

class CallDelivery {
 public:
  // `lanes` threads; 0 runs each callback inline at Flush (no threads).
  explicit CallDelivery(int lanes);
  ~CallDelivery();  // Drain()
  CallDelivery(const CallDelivery&) = delete;
  CallDelivery& operator=(const CallDelivery&) = delete;

  // The lanes a process of `cores` hardware threads gets by default: one per
  // four cores, from 1 to 4.
  static int DefaultLanes(unsigned cores);

  void Queue(const void* key, std::function<void()> callback);
  // Hands what was queued since the last Flush to the lanes (one wake-up per lane).
  void Flush();
  // Flush, waits until the lanes ran everything, joins them. Idempotent.
  void Drain();

 private:
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> work;
    bool stopping = false;
    std::thread thread;
  };
  void Run(Lane& lane);

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::vector<std::function<void()>>> pending_;  // per lane, since the last Flush
  bool drained_ = false;
};

}  // namespace seam::coordinator

// CallDelivery's lanes: a queue and a thread each.
#include "call_delivery.h"

#include <pthread.h>

#include <algorithm>
#include <string>

namespace seam::coordinator {

CallDelivery::CallDelivery(int lanes) : pending_(std::max(1, lanes)) {
  for (int i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<Lane>());
    Lane* lane = lanes_.back().get();
    lane->thread = std::thread([this, lane, i] {
      pthread_setname_np(pthread_self(), ("deliver-" + std::to_string(i)).c_str());  // in top -H, perf
      Run(*lane);
    });
  }
}

CallDelivery::~CallDelivery() { Drain(); }

int CallDelivery::DefaultLanes(unsigned cores) { return static_cast<int>(std::clamp(cores / 4, 1u, 4u)); }

void CallDelivery::Queue(const void* key, std::function<void()> callback) {
  if (drained_) {
    callback();
    return;
  }
  // The call's address picks its lane (its low bits are alignment).
  const size_t lane = (reinterpret_cast<uintptr_t>(key) >> 4) % pending_.size();
  pending_[lane].push_back(std::move(callback));
}

void CallDelivery::Flush() {
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].empty()) continue;
    if (lanes_.empty()) {
      std::vector<std::function<void()>> now;
      now.swap(pending_[i]);
      for (auto& f : now) f();
      continue;
    }
    Lane& lane = *lanes_[i];
    {
      std::lock_guard<std::mutex> lock(lane.mu);
      for (auto& f : pending_[i]) lane.work.push_back(std::move(f));
    }
    pending_[i].clear();
    lane.cv.notify_one();
  }
}

void CallDelivery::Drain() {
  if (drained_) return;
  Flush();
  for (auto& lane : lanes_) {
    {
      std::lock_guard<std::mutex> lock(lane->mu);
      lane->stopping = true;
    }
    lane->cv.notify_one();
  }
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  drained_ = true;
}

void CallDelivery::Run(Lane& lane) {
  std::deque<std::function<void()>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(lane.mu);
      lane.cv.wait(lock, [&] { return lane.stopping || !lane.work.empty(); });
      if (lane.work.empty()) return;  // stopping, and everything ran
      batch.swap(lane.work);
    }
    for (auto& f : batch) f();
    batch.clear();
  }
}

}  // namespace seam::coordinator

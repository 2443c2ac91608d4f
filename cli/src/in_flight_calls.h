// The calls a load transport (load_transport.h) has in flight, so that
// CancelAll can end them from any thread; once cancelled, Add refuses new
// ones. Thread-safe; the caller owns the calls and removes each before it
// goes away.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <utility>

namespace seam::cli {

template <typename Call>
class InFlightCalls {
 public:
  explicit InFlightCalls(std::function<void(Call*)> cancel) : cancel_(std::move(cancel)) {}

  // False (and not added) after CancelAll.
  bool Add(Call* call) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return false;
    calls_.insert(call);
    return true;
  }
  void Remove(Call* call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(call);
  }
  void CancelAll() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    for (Call* c : calls_) cancel_(c);
  }
  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }

 private:
  const std::function<void(Call*)> cancel_;
  std::mutex mu_;
  bool cancelled_ = false;
  std::set<Call*> calls_;
};

}  // namespace seam::cli

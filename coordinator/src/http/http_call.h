// One HTTP generation call as the pipeline driver sees it: a CallObserver
// that collects each sequence's tokens and end, read by the HTTP worker
// thread that serves the call. The driver's callbacks never block (they
// append under a mutex and notify); the worker waits. The call owns itself
// until the driver's OnDone, so a client that goes away (the worker returns
// early) never leaves the driver with a dead observer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline_driver.h"

namespace seam::coordinator::http {

class HttpCall final : public CallObserver {
 public:
  static std::shared_ptr<HttpCall> Make(int sequences);

  // What came since the previous Take.
  struct Progress {
    std::vector<std::vector<int32_t>> new_tokens;                 // per sequence
    std::vector<std::string> new_text;                            // per sequence: text released since
    std::vector<std::vector<v1::ChosenTokenLogprobs>> new_logprobs;  // per sequence, with log-probs asked
    std::vector<std::optional<FinishReason>> finished;            // set where it finished now
    bool done = false;                                            // OnDone came
    absl::Status status;                                          // its status, once done
    bool Empty() const;
  };
  // Waits up to `wait` for news (forever when `wait` is max), then takes it.
  Progress Take(std::chrono::milliseconds wait = std::chrono::milliseconds::max());
  // The client went away: the driver drops the call at its next check.
  void Cancel() { cancelled_.store(true); }

  // CallObserver, on the driver thread.
  void OnToken(int sequence_index, const TokenOutput& token) override;
  void OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) override;
  void OnScore(int, std::vector<float>) override {}
  void OnDone(const absl::Status& status) override;
  bool Cancelled() const override { return cancelled_.load(); }

 private:
  explicit HttpCall(int sequences);
  std::mutex mu_;
  std::condition_variable cv_;
  Progress pending_;  // not yet taken
  bool news_ = false;
  std::shared_ptr<HttpCall> self_;  // released by OnDone
  std::atomic<bool> cancelled_{false};
};

}  // namespace seam::coordinator::http

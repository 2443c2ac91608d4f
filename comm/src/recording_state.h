// RecordingWorld::State: the in-memory meeting point of one recording group.
// Rank threads deposit their input as call #k, wait (with a deadline) until
// every rank deposited call #k, then each computes its own output from all
// deposits. The state also keeps every rank's call log.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "seam/comm/collective.h"
#include "seam/comm/recording_communicator.h"

namespace seam::comm {

class RecordingWorld::State {
 public:
  struct Deposit {
    CollectiveRecord record;
    std::vector<char> bytes;  // this rank's input, host copy
  };

  State(std::string name, int size, CommOptions options)
      : name_(std::move(name)), size_(size), options_(options), logs_(size) {}

  const std::string& name() const { return name_; }
  int size() const { return size_; }
  const CommOptions& options() const { return options_; }

  void Log(int rank, const CollectiveRecord& record);
  std::vector<CollectiveRecord> LogOf(int rank) const;

  // Deposits `mine` as call `seq` of `rank` and waits until every rank has
  // deposited that call. On success `all` points at every rank's deposit (rank
  // order), valid until Release(seq). DEADLINE_EXCEEDED names the missing ranks.
  absl::Status Meet(int rank, int64_t seq, Deposit mine, std::vector<const Deposit*>* all);
  void Release(int64_t seq);

 private:
  struct Round {
    std::vector<Deposit> deposits;
    std::vector<bool> present;
    int arrived = 0;
    int released = 0;
  };

  const std::string name_;
  const int size_;
  const CommOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Round> rounds_;
  std::vector<std::vector<CollectiveRecord>> logs_;
};

}  // namespace seam::comm

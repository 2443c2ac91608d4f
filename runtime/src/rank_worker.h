// RankWorker: the thread of one TP rank of a stage group. It runs posted
// tasks one at a time, in order; the poster waits for each result with a
// deadline, so a rank that never answers turns into DEADLINE_EXCEEDED
// instead of a hang. Private to the models library.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace seam::runtime::internal {

// The result of one posted task.
class TaskResult {
 public:
  // The task's status, or DEADLINE_EXCEEDED when it has not finished by `deadline`.
  absl::Status Wait(absl::Time deadline);
  void Set(absl::Status status);

 private:
  absl::Mutex mu_;
  bool done_ = false;
  absl::Status status_;
};

class RankWorker {
 public:
  using Task = std::function<absl::Status()>;
  explicit RankWorker(int rank);
  // Runs the tasks already posted, then joins the thread.
  ~RankWorker();
  RankWorker(const RankWorker&) = delete;
  RankWorker& operator=(const RankWorker&) = delete;

  int rank() const { return rank_; }
  std::shared_ptr<TaskResult> Post(Task task);

 private:
  void Loop();
  const int rank_;
  absl::Mutex mu_;
  std::deque<std::pair<Task, std::shared_ptr<TaskResult>>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace seam::runtime::internal

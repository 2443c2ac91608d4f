#include "src/rank_worker.h"

#include <utility>

namespace seam::runtime::internal {

absl::Status TaskResult::Wait(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&done_), deadline)) {
    return absl::DeadlineExceededError("the rank did not finish its task in time");
  }
  return status_;
}

void TaskResult::Set(absl::Status status) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
  done_ = true;
}

RankWorker::RankWorker(int rank) : rank_(rank), thread_([this] { Loop(); }) {}

RankWorker::~RankWorker() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::shared_ptr<TaskResult> RankWorker::Post(Task task) {
  auto result = std::make_shared<TaskResult>();
  absl::MutexLock lock(&mu_);
  tasks_.emplace_back(std::move(task), result);
  return result;
}

void RankWorker::Loop() {
  for (;;) {
    std::pair<Task, std::shared_ptr<TaskResult>> next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RankWorker* w) { return w->stopping_ || !w->tasks_.empty(); }, this));
      if (tasks_.empty()) return;  // stopping, nothing left
      next = std::move(tasks_.front());
      tasks_.pop_front();
    }
    next.second->Set(next.first());
  }
}

}  // namespace seam::runtime::internal

// RecordingWorld: shared state of a recording group, its logs and the
// sequence comparison; RecordingRegistry: worlds by group name.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "recording_state.h"
#include "seam/core/status.h"

namespace seam::comm {

void RecordingWorld::State::Log(int rank, const CollectiveRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  logs_[rank].push_back(record);
}

std::vector<CollectiveRecord> RecordingWorld::State::LogOf(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return logs_[rank];
}

absl::Status RecordingWorld::State::Meet(int rank, int64_t seq, Deposit mine, std::vector<const Deposit*>* all) {
  std::unique_lock<std::mutex> lock(mu_);
  Round& round = rounds_[seq];
  if (round.deposits.empty()) {
    round.deposits.resize(size_);
    round.present.assign(size_, false);
  }
  round.deposits[rank] = std::move(mine);
  round.present[rank] = true;
  ++round.arrived;
  cv_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options_.timeout);
  if (!cv_.wait_until(lock, deadline, [&] { return round.arrived == size_; })) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!round.present[r]) missing.push_back(r);
    }
    return absl::DeadlineExceededError(absl::StrCat("call #", seq, " did not complete within ",
                                                    absl::FormatDuration(options_.timeout), ": rank(s) ",
                                                    absl::StrJoin(missing, ", "), " did not arrive"));
  }
  all->clear();
  for (const Deposit& d : round.deposits) all->push_back(&d);
  return absl::OkStatus();
}

void RecordingWorld::State::Release(int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rounds_.find(seq);
  if (it != rounds_.end() && ++it->second.released == size_) rounds_.erase(it);
}

RecordingWorld::RecordingWorld(std::shared_ptr<State> state) : state_(std::move(state)) {}
RecordingWorld::~RecordingWorld() = default;

std::shared_ptr<RecordingWorld> RecordingWorld::Create(std::string name, int size, CommOptions options) {
  SEAM_CHECK_MSG(size >= 1, "recording group '", name, "' needs at least one rank, got ", size);
  return std::shared_ptr<RecordingWorld>(
      new RecordingWorld(std::make_shared<State>(std::move(name), size, options)));
}

const std::string& RecordingWorld::name() const { return state_->name(); }
int RecordingWorld::size() const { return state_->size(); }

std::vector<CollectiveRecord> RecordingWorld::Log(int rank) const { return state_->LogOf(rank); }

std::vector<std::vector<CollectiveRecord>> RecordingWorld::Logs() const {
  std::vector<std::vector<CollectiveRecord>> logs;
  for (int r = 0; r < size(); ++r) logs.push_back(state_->LogOf(r));
  return logs;
}

absl::Status RecordingWorld::ExpectSameSequence() const { return seam::comm::ExpectSameSequence(name(), Logs()); }

absl::Status ExpectSameSequence(const std::string& group, const std::vector<std::vector<CollectiveRecord>>& logs) {
  size_t longest = 0;
  for (const auto& log : logs) longest = std::max(longest, log.size());
  auto describe = [](const std::vector<CollectiveRecord>& log, size_t i) {
    return i < log.size() ? log[i].ToString() : std::string("no call");
  };
  for (size_t i = 0; i < longest; ++i) {
    // The reference is the entry most ranks have at i (the lowest rank's on a tie).
    size_t best = 0;
    int best_votes = -1;
    for (size_t r = 0; r < logs.size(); ++r) {
      int votes = 0;
      for (const auto& other : logs) {
        votes += (describe(other, i) == describe(logs[r], i)) ? 1 : 0;
      }
      if (votes > best_votes) best = r, best_votes = votes;
    }
    for (size_t r = 0; r < logs.size(); ++r) {
      if (describe(logs[r], i) != describe(logs[best], i)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "group '", group, "': rank ", r, " diverges at call #", i, ": expected ", describe(logs[best], i),
            " (as rank ", best, "), got ", describe(logs[r], i), "; rank ", r, " issued ", logs[r].size(),
            " calls, rank ", best, " issued ", logs[best].size()));
      }
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<RecordingWorld> RecordingRegistry::World(const std::string& name, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = worlds_.find(name);
  if (it == worlds_.end()) it = worlds_.emplace(name, RecordingWorld::Create(name, size, options_)).first;
  SEAM_CHECK_MSG(it->second->size() == size, "recording group '", name, "' has ", it->second->size(),
                 " ranks, requested again with ", size);
  return it->second;
}

std::vector<std::shared_ptr<RecordingWorld>> RecordingRegistry::Worlds() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<RecordingWorld>> worlds;
  for (const auto& [name, world] : worlds_) worlds.push_back(world);
  return worlds;
}

std::vector<std::string> RecordingRegistry::GroupNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, world] : worlds_) names.push_back(name);
  return names;
}

absl::Status RecordingRegistry::ExpectSameSequenceInEveryGroup() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, world] : worlds_) SEAM_RETURN_IF_ERROR(world->ExpectSameSequence());
  return absl::OkStatus();
}

}  // namespace seam::comm

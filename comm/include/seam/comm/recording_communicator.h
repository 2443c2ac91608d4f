// Recording fake for unit tests: a RecordingWorld is shared by the N rank
// threads of one group and really performs every collective in memory (fp32
// sums in rank order, so every rank gets the same bits), with the same
// deadline semantics as the real backends. Each rank's calls are logged so a
// test can check that all ranks issued the same sequence.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "seam/comm/collective.h"
#include "seam/comm/communicator.h"

namespace seam::comm {

class RecordingWorld {
 public:
  // A group `name` of `size` ranks; calls wait at most options.timeout for peers.
  static std::shared_ptr<RecordingWorld> Create(std::string name, int size, CommOptions options = {});
  ~RecordingWorld();

  const std::string& name() const;
  int size() const;
  // The communicator of `rank` (one per rank; it keeps the world alive).
  std::unique_ptr<Communicator> MakeCommunicator(int rank);

  // Every call `rank` issued, in order (including calls that failed).
  std::vector<CollectiveRecord> Log(int rank) const;
  std::vector<std::vector<CollectiveRecord>> Logs() const;
  // OK when every rank issued the same sequence; otherwise FAILED_PRECONDITION
  // naming the first divergent call and rank.
  absl::Status ExpectSameSequence() const;

  class State;  // shared with the communicators (private to the implementation)

 private:
  explicit RecordingWorld(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// Compares per-rank logs of group `group`. At the first call index where the
// ranks disagree, the record most ranks issued (the lowest rank's on a tie) is
// the reference, and the first rank that differs is named:
// "group 'tp': rank 2 diverges at call #1: expected AllReduce(...), got Broadcast(...)".
absl::Status ExpectSameSequence(const std::string& group, const std::vector<std::vector<CollectiveRecord>>& logs);

// The recording worlds of several groups (e.g. all groups of ProcessGroups),
// created on first use by name.
class RecordingRegistry {
 public:
  explicit RecordingRegistry(CommOptions options = {}) : options_(options) {}
  // The world named `name`; created with `size` ranks on first use. A later
  // request with another size is a bug (aborts).
  std::shared_ptr<RecordingWorld> World(const std::string& name, int size);
  std::vector<std::string> GroupNames() const;
  // Every world created so far, in name order.
  std::vector<std::shared_ptr<RecordingWorld>> Worlds() const;
  // ExpectSameSequence of every world; the first failure.
  absl::Status ExpectSameSequenceInEveryGroup() const;

 private:
  CommOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<RecordingWorld>> worlds_;
};

}  // namespace seam::comm

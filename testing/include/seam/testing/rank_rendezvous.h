// Test support: threads standing in for the ranks of a group meet here
// before tearing down their communicators. A rank that has finished its
// last collective must not close its connections while a peer is still
// inside that collective: over Gloo's TCP pairs the peer then reads
// "connection closed by peer" instead of its data (seen under load in
// boundary_gloo_grid_test). Production groups meet at every step's end
// (StageGroup::RunOnAll) before anything is torn down.
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace seam::testing {

class RankRendezvous {
 public:
  explicit RankRendezvous(int ranks) : ranks_(ranks) {}
  // Blocks until every rank has arrived or `timeout` has passed (a rank
  // that never arrives must not hang the others; the test fails elsewhere).
  void ArriveAndWait(absl::Duration timeout = absl::Seconds(60));

 private:
  const int ranks_;
  int arrived_ = 0;
  std::mutex mu_;
  std::condition_variable all_;
};

// Arrives at the rendezvous when it goes out of scope: declare it after the
// groups it protects, so that they are torn down only once every rank is done.
class ArriveOnExit {
 public:
  explicit ArriveOnExit(RankRendezvous& at) : at_(at) {}
  ~ArriveOnExit() { at_.ArriveAndWait(); }
  ArriveOnExit(const ArriveOnExit&) = delete;
  ArriveOnExit& operator=(const ArriveOnExit&) = delete;

 private:
  RankRendezvous& at_;
};

}  // namespace seam::testing

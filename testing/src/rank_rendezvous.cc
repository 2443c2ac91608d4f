#include "seam/testing/rank_rendezvous.h"

namespace seam::testing {

void RankRendezvous::ArriveAndWait(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  ++arrived_;
  all_.notify_all();
  all_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [this] { return arrived_ >= ranks_; });
}

}  // namespace seam::testing

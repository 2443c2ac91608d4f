#include "rank_threads.h"

#include <memory>
#include <thread>
#include <utility>

#include "seam/core/status.h"
#include "seam/testing/rank_rendezvous.h"

namespace seam::boundary::testing {

StageComms CommsOf(const comm::ProcessGroups& groups) {
  return StageComms{&groups.tp(), &groups.attn_tp(), &groups.attn_dp(), &groups.attn_cp()};
}

std::vector<absl::Status> RunRanks(int tp, int attn_dp, const comm::CommunicatorFactory& factory, const RankFn& fn,
                                   int attn_cp) {
  std::vector<absl::Status> results(tp);
  std::vector<std::thread> threads;
  seam::testing::RankRendezvous teardown(tp);
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::ProcessGroups> groups;  // torn down once every rank is done
      seam::testing::ArriveOnExit done(teardown);
      auto made = comm::ProcessGroups::Create(comm::Topology{tp, attn_dp, 1, attn_cp}, r, factory);
      if (!made.ok()) {
        results[r] = made.status();
        return;
      }
      groups = std::move(*made);
      auto topology = Topology::Make(tp, attn_dp, r, attn_cp);
      if (!topology.ok()) {
        results[r] = topology.status();
        return;
      }
      results[r] = fn(*topology, CommsOf(*groups));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace seam::boundary::testing

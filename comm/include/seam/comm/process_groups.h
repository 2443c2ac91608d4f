// ProcessGroups: the communicators of one TP rank of a stage, derived from the
// topology. tp_rank = (dp_rank * attn_cp + cp_rank) * attn_tp + attn_tp_rank:
// the attention-TP group holds the ranks of one (dp_rank, cp_rank), the
// attention-DP group the ranks of one (cp_rank, attn_tp_rank), the
// context-parallel group the ranks of one (dp_rank, attn_tp_rank). The groups are created through a factory so Gloo, NCCL and the
// recording fake plug in alike; ProcessGroups owns the communicators.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/comm/communicator.h"
#include "seam/comm/gloo_communicator.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/store.h"

namespace seam::comm {

struct Topology {
  int tp = 1;       // tensor-parallel ranks of a stage
  int attn_dp = 1;  // attention data-parallel replicas inside the TP group
  int pp = 1;       // pipeline stages (not a group of this process)
  int attn_cp = 1;  // context-parallel ranks inside each attention-DP group
  int attn_tp() const { return attn_dp > 0 && attn_cp > 0 ? tp / (attn_dp * attn_cp) : 0; }
};

// INVALID_ARGUMENT naming the sizes unless every size is >= 1 and tp is
// divisible by attn_dp · attn_cp.
absl::Status ValidateTopology(const Topology& topology);

// Creates the communicator of group `group_name` ("tp", "attn_tp.dp1",
// "attn_dp.r0") whose members are `member_tp_ranks` (ascending); this rank is
// member `my_index`. Called by every member, in the same order of groups.
using CommunicatorFactory = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    const std::string& group_name, const std::vector<int>& member_tp_ranks, int my_index)>;

class ProcessGroups {
 public:
  // Creates "tp", then "attn_tp.dp<d>" ("attn_tp.dp<d>.cp<c>" with CP ranks),
  // then "attn_dp.r<a>" ("attn_dp.cp<c>.r<a>"), then "attn_cp.dp<d>.r<a>". Groups of one
  // rank are SelfCommunicators (the factory is not called); a group whose
  // members equal the TP group's is the TP communicator itself.
  static absl::StatusOr<std::unique_ptr<ProcessGroups>> Create(const Topology& topology, int tp_rank,
                                                               const CommunicatorFactory& factory);

  const Topology& topology() const { return topology_; }
  int tp_rank() const { return tp_rank_; }
  int dp_rank() const { return tp_rank_ / (topology_.attn_cp * topology_.attn_tp()); }
  int cp_rank() const { return (tp_rank_ / topology_.attn_tp()) % topology_.attn_cp; }
  int attn_tp_rank() const { return tp_rank_ % topology_.attn_tp(); }
  int tp_size() const { return topology_.tp; }
  int attn_tp_size() const { return topology_.attn_tp(); }
  int attn_dp_size() const { return topology_.attn_dp; }

  Communicator& tp() const { return *tp_; }
  Communicator& attn_tp() const { return attn_tp_ ? *attn_tp_ : *tp_; }
  Communicator& attn_dp() const { return attn_dp_ ? *attn_dp_ : *tp_; }
  Communicator& attn_cp() const { return attn_cp_ ? *attn_cp_ : *tp_; }

  // Synchronize of each distinct communicator (tp, then attn_tp, then
  // attn_dp, then attn_cp), all against `deadline`: the one wait a step makes at its end
  // (see Communicator). Stops at the first error, which it returns.
  absl::Status Synchronize(absl::Time deadline);

  // Members (TP ranks, ascending) of the groups of a topology.
  static std::vector<int> AttnTpMembers(const Topology& topology, int dp_rank, int cp_rank = 0);
  static std::vector<int> AttnDpMembers(const Topology& topology, int attn_tp_rank, int cp_rank = 0);
  static std::vector<int> AttnCpMembers(const Topology& topology, int dp_rank, int attn_tp_rank);

 private:
  ProcessGroups(Topology topology, int tp_rank) : topology_(topology), tp_rank_(tp_rank) {}
  Topology topology_;
  int tp_rank_;
  std::unique_ptr<Communicator> tp_;
  std::unique_ptr<Communicator> attn_tp_;  // null: same members as tp_
  std::unique_ptr<Communicator> attn_dp_;  // null: same members as tp_
  std::unique_ptr<Communicator> attn_cp_;  // null: same members as tp_
};

// Gloo groups: group g uses MakePrefixStore(g, store), rank = my_index.
CommunicatorFactory MakeGlooGroupFactory(std::shared_ptr<Store> store, CommOptions options,
                                         GlooTransportOptions transport = {});
// NCCL groups: group g rendezvouses under MakePrefixStore(g, store), rank =
// my_index, on the calling thread's current GPU and its legacy stream.
// Without NCCL in the build, every group fails with FAILED_PRECONDITION.
CommunicatorFactory MakeNcclGroupFactory(std::shared_ptr<Store> store, CommOptions options);
// Recording groups: group g is registry->World(g, members.size()).
CommunicatorFactory MakeRecordingGroupFactory(std::shared_ptr<RecordingRegistry> registry);

}  // namespace seam::comm

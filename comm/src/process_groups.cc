// ProcessGroups: derives the TP, attention-TP and attention-DP groups of one
// TP rank from the topology and creates their communicators.
#include "seam/comm/process_groups.h"

#include "absl/strings/str_cat.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"

namespace seam::comm {

absl::Status ValidateTopology(const Topology& t) {
  const std::string sizes = absl::StrCat("tp=", t.tp, " attn_dp=", t.attn_dp, " pp=", t.pp,
                                         t.attn_cp != 1 ? absl::StrCat(" attn_cp=", t.attn_cp) : "");
  if (t.tp < 1 || t.attn_dp < 1 || t.pp < 1 || t.attn_cp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("invalid topology ", sizes, ": every size must be at least 1"));
  }
  if (t.tp % t.attn_dp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid topology ", sizes, ": tp must be divisible by attn_dp (", t.tp, " % ", t.attn_dp,
                     " = ", t.tp % t.attn_dp, ")"));
  }
  if ((t.tp / t.attn_dp) % t.attn_cp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid topology ", sizes, ": attn_cp must divide tp / attn_dp"));
  }
  return absl::OkStatus();
}

std::vector<int> ProcessGroups::AttnTpMembers(const Topology& t, int dp_rank, int cp_rank) {
  std::vector<int> members;
  for (int a = 0; a < t.attn_tp(); ++a) members.push_back((dp_rank * t.attn_cp + cp_rank) * t.attn_tp() + a);
  return members;
}

std::vector<int> ProcessGroups::AttnDpMembers(const Topology& t, int attn_tp_rank, int cp_rank) {
  std::vector<int> members;
  for (int d = 0; d < t.attn_dp; ++d) members.push_back((d * t.attn_cp + cp_rank) * t.attn_tp() + attn_tp_rank);
  return members;
}

std::vector<int> ProcessGroups::AttnCpMembers(const Topology& t, int dp_rank, int attn_tp_rank) {
  std::vector<int> members;
  for (int c = 0; c < t.attn_cp; ++c) members.push_back((dp_rank * t.attn_cp + c) * t.attn_tp() + attn_tp_rank);
  return members;
}

namespace {

absl::StatusOr<std::unique_ptr<Communicator>> MakeGroup(const std::string& name, const std::vector<int>& members,
                                                        int tp_rank, const CommunicatorFactory& factory) {
  if (members.size() == 1) return MakeSelfCommunicator(name);
  int my_index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == tp_rank) my_index = static_cast<int>(i);
  }
  SEAM_CHECK_MSG(my_index >= 0, "tp rank ", tp_rank, " is not a member of group ", name);
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, factory(name, members, my_index));
  if (comm == nullptr || comm->size() != static_cast<int>(members.size()) || comm->rank() != my_index) {
    return absl::InternalError(absl::StrCat("group '", name, "': the factory returned a communicator of rank ",
                                            comm ? comm->rank() : -1, "/", comm ? comm->size() : 0, ", expected ",
                                            my_index, "/", members.size()));
  }
  return comm;
}

}  // namespace

absl::Status ProcessGroups::Synchronize(absl::Time deadline) {
  for (Communicator* c : {tp_.get(), attn_tp_.get(), attn_dp_.get(), attn_cp_.get()}) {
    if (c != nullptr) SEAM_RETURN_IF_ERROR(c->Synchronize(deadline));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProcessGroups>> ProcessGroups::Create(const Topology& topology, int tp_rank,
                                                                     const CommunicatorFactory& factory) {
  SEAM_RETURN_IF_ERROR(ValidateTopology(topology));
  if (tp_rank < 0 || tp_rank >= topology.tp) {
    return absl::InvalidArgumentError(absl::StrCat("tp rank ", tp_rank, " is outside [0, ", topology.tp, ")"));
  }
  std::unique_ptr<ProcessGroups> groups(new ProcessGroups(topology, tp_rank));
  std::vector<int> all;
  for (int r = 0; r < topology.tp; ++r) all.push_back(r);
  SEAM_ASSIGN_OR_RETURN(groups->tp_, MakeGroup("tp", all, tp_rank, factory));
  const int dp = groups->dp_rank();
  const int a = groups->attn_tp_rank();
  const int c = groups->cp_rank();
  const bool cp = topology.attn_cp > 1;
  const std::string cp_tag = cp ? absl::StrCat(".cp", c) : "";
  // A group with the TP group's members is served by the TP communicator.
  if (topology.attn_dp > 1 || cp) {
    SEAM_ASSIGN_OR_RETURN(groups->attn_tp_, MakeGroup(absl::StrCat("attn_tp.dp", dp, cp_tag),
                                                      AttnTpMembers(topology, dp, c), tp_rank, factory));
  }
  if (topology.attn_tp() > 1 || cp) {
    const std::string name = cp ? absl::StrCat("attn_dp.cp", c, ".r", a) : absl::StrCat("attn_dp.r", a);
    SEAM_ASSIGN_OR_RETURN(groups->attn_dp_, MakeGroup(name, AttnDpMembers(topology, a, c), tp_rank, factory));
  }
  if (cp && topology.attn_cp != topology.tp) {
    SEAM_ASSIGN_OR_RETURN(groups->attn_cp_, MakeGroup(absl::StrCat("attn_cp.dp", dp, ".r", a),
                                                      AttnCpMembers(topology, dp, a), tp_rank, factory));
  }
  return groups;
}

}  // namespace seam::comm

// Ready CommunicatorFactory implementations for ProcessGroups: Gloo and NCCL
// (one store prefix per group) and the recording fake (one world per group).
#include "absl/strings/str_cat.h"
#include "seam/comm/gloo_communicator.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/comm/process_groups.h"
#include "seam/core/status.h"

namespace seam::comm {

CommunicatorFactory MakeGlooGroupFactory(std::shared_ptr<Store> store, CommOptions options,
                                         GlooTransportOptions transport) {
  return [store = std::move(store), options, transport](const std::string& group_name,
                                                        const std::vector<int>& members, int my_index) {
    return MakeGlooCommunicator(MakePrefixStore(group_name, store), group_name, my_index,
                                static_cast<int>(members.size()), options, transport);
  };
}

CommunicatorFactory MakeNcclGroupFactory(std::shared_ptr<Store> store, CommOptions options) {
  return [store = std::move(store), options](const std::string& group_name, const std::vector<int>& members,
                                             int my_index) -> absl::StatusOr<std::unique_ptr<Communicator>> {
#ifdef SEAM_HAVE_NCCL
    NcclOptions nccl;
    nccl.comm = options;
    SEAM_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> c,
                          MakeNcclCommunicator(MakePrefixStore(group_name, store), group_name, my_index,
                                               static_cast<int>(members.size()), nccl));
    return std::unique_ptr<Communicator>(std::move(c));
#else
    return absl::FailedPreconditionError(absl::StrCat("group ", group_name, ": this build has no NCCL"));
#endif
  };
}

CommunicatorFactory MakeRecordingGroupFactory(std::shared_ptr<RecordingRegistry> registry) {
  return [registry = std::move(registry)](const std::string& group_name, const std::vector<int>& members,
                                          int my_index) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    return registry->World(group_name, static_cast<int>(members.size()))->MakeCommunicator(my_index);
  };
}

}  // namespace seam::comm

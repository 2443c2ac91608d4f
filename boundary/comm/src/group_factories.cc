// Ready CommunicatorFactory implementations for ProcessGroups: Gloo (one
// store prefix per group) and the recording fake (one world per group).
#include "seam/comm/gloo_communicator.h"
#include "seam/comm/process_groups.h"

namespace seam::comm {

CommunicatorFactory MakeGlooGroupFactory(std::shared_ptr<Store> store, CommOptions options,
                                         GlooTransportOptions transport) {
  return [store = std::move(store), options, transport](const std::string& group_name,
                                                        const std::vector<int>& members, int my_index) {
    return MakeGlooCommunicator(MakePrefixStore(group_name, store), group_name, my_index,
                                static_cast<int>(members.size()), options, transport);
  };
}

CommunicatorFactory MakeRecordingGroupFactory(std::shared_ptr<RecordingRegistry> registry) {
  return [registry = std::move(registry)](const std::string& group_name, const std::vector<int>& members,
                                          int my_index) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    return registry->World(group_name, static_cast<int>(members.size()))->MakeCommunicator(my_index);
  };
}

}  // namespace seam::comm

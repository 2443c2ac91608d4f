// The collective log of real groups: a communicator that records every call
// it is given (as the rank-independent CollectiveRecord the backends
// validate) and forwards it to a real one (Gloo, NCCL), so a test can count
// what a path moves over real collectives. The recording fake
// (recording_communicator.h) logs too, but computes in memory.
//
// Thread safety: one CollectiveLog is shared by the rank threads of a test;
// each wrapped communicator is used by its own rank's thread, as any
// communicator is.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "seam/comm/collective.h"
#include "seam/comm/communicator.h"
#include "seam/comm/process_groups.h"

namespace seam::comm {

// The bytes of a call's group-wide tensor (CollectiveRecord::shape × its
// dtype): the data an all-reduce sums, the full input of a reduce-scatter,
// the full output of a gather. 0 for a barrier.
int64_t CollectiveBytes(const CollectiveRecord& record);

class CollectiveLog {
 public:
  void Append(const std::string& group, int rank, CollectiveRecord record);
  // Every call rank `rank` of `group` issued, in order (calls whose
  // arguments the backend refused included).
  std::vector<CollectiveRecord> Calls(const std::string& group, int rank) const;
  // The groups logged so far, in name order.
  std::vector<std::string> Groups() const;
  // Σ CollectiveBytes over Calls(group, rank).
  int64_t Bytes(const std::string& group, int rank) const;
  // Forgets every call (between two runs of one test).
  void Clear();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::vector<CollectiveRecord>> calls_;
};

// `inner`, with each call logged under (inner->name(), inner->rank()) before
// it is forwarded. Errors are inner's.
std::unique_ptr<Communicator> LogCalls(std::unique_ptr<Communicator> inner, std::shared_ptr<CollectiveLog> log);

// The groups of `inner`, each wrapped by LogCalls.
CommunicatorFactory MakeLoggedGroupFactory(CommunicatorFactory inner, std::shared_ptr<CollectiveLog> log);

}  // namespace seam::comm

// GlooCommunicator: collectives over Gloo's TCP transport, for CPU ranks that
// are threads of one process or separate processes. Ranks find each other
// through a Store (one store prefix per group). Host tensors only.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "seam/comm/communicator.h"
#include "seam/comm/store.h"

namespace seam::comm {

// Where the TCP transport listens. `interface` (e.g. "eth0") wins over
// `hostname` when set; the default is IPv4 loopback.
struct GlooTransportOptions {
  std::string hostname = "127.0.0.1";
  std::string interface;
};

// Connects rank `rank` of a group of `size` through `store` (every rank of
// the group passes a store with the same keys, e.g. the same PrefixStore).
// Blocks until every rank has joined or options.timeout has passed
// (DEADLINE_EXCEEDED naming the missing store key). Reductions of bf16/f16/
// fp8 are summed in fp32 and rounded once; i32/i64 are summed as integers.
// Every rank of the group receives the same bits.
absl::StatusOr<std::unique_ptr<Communicator>> MakeGlooCommunicator(std::shared_ptr<Store> store,
                                                                   std::string group_name, int rank, int size,
                                                                   CommOptions options,
                                                                   GlooTransportOptions transport = {});

}  // namespace seam::comm

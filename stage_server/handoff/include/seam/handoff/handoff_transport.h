// How a link between neighbouring stages carries its payloads: a small table
// of transports in order of preference, each row asking whether it can
// serve the link (as NCCL's transports answer canConnect). The producer of
// a link offers what it has (a DeviceLinkOffer in its headers); the consumer
// runs ChooseTransport over its own facts and answers; the host path always
// serves, so a link never lacks one.
//
// Rows today: CUDA_IPC (a device ring of the producer read through CUDA IPC
// handles: same host, another process, every lane's producer GPU reachable
// from the consumer lane's GPU) and HOST_UCX (payloads through host memory
// over UCX). A CUDA-aware UCX would be one more row between the two (its
// can_connect asks the UCX context for CUDA memory support, its offer needs
// no handles) with a HandoffTransport value of its own; nothing else in the
// protocol changes: headers name their transport, and a consumer's
// HandoffReceiver takes each header's payloads from the source for it.
// Pure decisions over plain data: no CUDA call here (DeviceHandoffReceiver
// gathers the facts).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

// What the consumer of a link knows about itself.
struct ConsumerFacts {
  bool cuda_ipc_built = false;  // this build has the CUDA path
  std::string host_id;          // LocalHostId()
  int64_t pid = 0;
  // Per consumer lane (TP rank): the PCI bus ids of the GPUs its GPU can
  // read (itself, and peers with peer access); empty on a host stage.
  std::vector<std::set<std::string>> reachable;
};

struct TransportRow {
  v1::HandoffTransport transport;
  const char* name;
  // OK when the row can serve a link with this offer (null: the producer
  // offered nothing) to this consumer; otherwise FAILED_PRECONDITION saying why.
  absl::Status (*can_connect)(const v1::DeviceLinkOffer* offer, const ConsumerFacts& facts);
};

// The rows in order of preference; the last always connects.
absl::Span<const TransportRow> TransportTable();

struct TransportChoice {
  v1::HandoffTransport transport = v1::HANDOFF_TRANSPORT_HOST_UCX;
  // Why each row before the chosen one declined, "; "-separated ("" when the first serves).
  std::string passed_over;
};
TransportChoice ChooseTransport(const v1::DeviceLinkOffer* offer, const ConsumerFacts& facts);

// "cuda_ipc", "host_ucx" (UNSPECIFIED reads as host_ucx on the wire; named "none" here).
const char* TransportName(v1::HandoffTransport transport);

// This host's identity for the same-host check: its boot id and host name.
std::string LocalHostId();

}  // namespace seam::handoff

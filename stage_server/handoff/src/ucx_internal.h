// Internal state shared by ucx_worker.cc (lifetime: context, worker,
// endpoints) and ucx_transfer.cc (tagged send/receive). Not installed.
#pragma once

#include <ucp/api/ucp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "seam/handoff/ucx_worker.h"

namespace seam::handoff {

struct UcxWorker::Handles {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
};

// What a UcxWorker::Wait ended with.
struct UcxWorker::Outcome {
  enum class End { kDone, kDeadline, kPeerFailed };
  End end = End::kDone;
  ucs_status_t status = UCS_OK;  // completion status of the request
  size_t length = 0;             // received bytes (receives only)
  uint64_t sender_tag = 0;       // full tag of the received message
};

// One endpoint, shared by the UcxEndpoint handle and the worker's list so
// that whichever goes first can close it. Touched only by the worker's thread.
struct UcxEndpointState {
  ucp_worker_h worker = nullptr;  // null once the owning worker is gone
  ucp_ep_h ep = nullptr;          // null once closed
  UcxErrorMode mode = UcxErrorMode::kPeer;
  ucs_status_t failure = UCS_OK;  // set by the error callback or a forced close
  absl::Duration close_timeout = absl::Seconds(1);
  absl::Duration cancel_grace = absl::Seconds(2);

  // ucp_err_handler_cb_t: the peer is gone or the transport broke.
  static void OnError(void* arg, ucp_ep_h ep, ucs_status_t status);
  bool failed() const { return failure != UCS_OK; }
};

// Releases the endpoint without waiting for the peer: outstanding requests
// complete with UCS_ERR_CANCELED. Marks the state failed with `reason`.
void ForceCloseEndpoint(UcxEndpointState& state, ucs_status_t reason);

}  // namespace seam::handoff

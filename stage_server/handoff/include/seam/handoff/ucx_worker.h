// UcxWorker: one UCP context and one worker that a single thread drives, with
// tagged send/receive of host buffers under deadlines. UcxEndpoint: a
// connection to a peer worker whose failure turns every later or in-flight
// operation that watches it into UNAVAILABLE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace seam::handoff {

enum class UcxErrorMode {
  // Endpoints detect dead peers and report them through the error callback.
  // On UCX 1.13 this restricts the transports to TCP.
  kPeer,
  // No peer failure detection; allows shared memory (sysv/posix + cma) between
  // processes of one host. A dead peer shows up only as a missed deadline.
  kNone,
};

struct UcxWorkerOptions {
  UcxErrorMode error_mode = UcxErrorMode::kPeer;
  // UCX settings applied on top of the UCX_* environment with ucp_config_modify,
  // named without the UCX_ prefix: {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}}.
  std::vector<std::pair<std::string, std::string>> config;
  // After a deadline or a peer failure cancels a request, how long UCX may
  // take to complete it; past that the process aborts, because the caller's
  // buffer cannot be released safely (a bound on UCX, never expected to hit).
  absl::Duration cancel_grace = absl::Seconds(2);
  // Time an endpoint destructor allows a graceful close before forcing it.
  absl::Duration close_timeout = absl::Seconds(1);
  // The least time a message that has arrived gets to finish its transfer
  // (RecvUnknownSize, TakeUnread), whatever the caller's deadline.
  absl::Duration transfer_grace = absl::Seconds(1);
};

struct UcxEndpointState;  // defined in ucx_worker.cc

// A connection to one peer worker. Move-only; the destructor closes it. The
// worker that created it must be used on the same thread; endpoints that
// outlive their worker were force-closed by it and report UNAVAILABLE.
class UcxEndpoint {
 public:
  UcxEndpoint() = default;
  UcxEndpoint(UcxEndpoint&&) noexcept = default;
  UcxEndpoint& operator=(UcxEndpoint&& other) noexcept;
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;
  ~UcxEndpoint();

  bool valid() const { return state_ != nullptr; }
  // OK while usable; UNAVAILABLE naming the UCX error once the peer failed,
  // FAILED_PRECONDITION once closed or for an endpoint never connected.
  absl::Status health() const;
  // Flushes outstanding sends and closes. A failed endpoint, or one whose
  // flush misses `deadline`, is closed by force. In PEER mode a graceful close
  // needs the peer to progress; if it does not by `deadline`, Close returns
  // DEADLINE_EXCEEDED and leaves the rest to UCX. Never waits past `deadline`
  // (plus cancel_grace for a forced close).
  absl::Status Close(absl::Time deadline);
  // UCX's description of the lanes and transports in use (ucp_ep_print_info).
  std::string DescribeTransports() const;

 private:
  friend class UcxWorker;
  std::shared_ptr<UcxEndpointState> state_;
};

class UcxWorker {
 public:
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(const UcxWorkerOptions& options = {});
  ~UcxWorker();  // force-closes endpoints still open, then releases UCX
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Worker address: opaque bytes a peer passes to Connect (exchanged through
  // the control plane).
  const std::string& Address() const { return address_; }
  // Creates an endpoint to the worker at `peer_address`. Wire-up completes in
  // the background while either side progresses.
  absl::StatusOr<UcxEndpoint> Connect(absl::string_view peer_address);

  // Sends `size` bytes with `tag`; returns when the buffer may be reused.
  // DEADLINE_EXCEEDED (naming tag and size) when not done by `deadline`:
  // UCX cannot cancel a send, so the endpoint is force-closed, and reports
  // UNAVAILABLE from then on (a stream that missed a send is broken anyway).
  // UNAVAILABLE when the endpoint failed before or during the send.
  absl::Status Send(UcxEndpoint& endpoint, uint64_t tag, const void* data, size_t size, absl::Time deadline);

  // Receives one message whose tag matches `tag` on the bits set in
  // `tag_mask` into `data` (at most `capacity` bytes); returns its length.
  // OUT_OF_RANGE when the message is longer than `capacity`. If `watch` is
  // given, its failure cancels the receive with UNAVAILABLE (a receive is not
  // tied to an endpoint in UCX, so the caller names the peer it waits for).
  absl::StatusOr<size_t> Recv(uint64_t tag, uint64_t tag_mask, void* data, size_t capacity, absl::Time deadline,
                              const UcxEndpoint* watch = nullptr);

  // Receives one message of unknown size, at most `max_size` bytes
  // (ucp_tag_probe_nb, then ucp_tag_msg_recv_nbx). A longer message is taken
  // off the wire into no buffer, so its claimed length is never allocated,
  // and gives OUT_OF_RANGE naming that length. `sender_tag`, if given,
  // receives the full tag (also for a message too long). `deadline` bounds
  // the wait for a message to arrive; one that has arrived gets at least
  // transfer_grace to finish (a header taken off the queue is never lost to
  // a short wait). A message whose transfer fails (its sender went away
  // mid-message) gives the transfer's error, UNAVAILABLE mostly.
  absl::StatusOr<std::vector<char>> RecvUnknownSize(uint64_t tag, uint64_t tag_mask, size_t max_size,
                                                    absl::Time deadline, const UcxEndpoint* watch = nullptr,
                                                    uint64_t* sender_tag = nullptr);

  // A message taken off the wire unread (TakeUnread).
  struct Unread {
    uint64_t tag = 0;
    size_t length = 0;     // the length its sender claimed
    bool failed = false;   // its transfer failed (a sender gone mid-message)
  };
  // Takes one message that has already arrived and whose tag matches `tag`
  // on the bits of `tag_mask` off the wire unread: received into no buffer,
  // so an eager message's bytes are released and a rendezvous message's are
  // never fetched. Never waits for a message: nullopt when none matches.
  std::optional<Unread> TakeUnread(uint64_t tag, uint64_t tag_mask);

  // True when a message whose tag matches `tag` on the bits of `tag_mask`
  // has begun to arrive; it stays where it is for a receive to take. One
  // round of progress first; never waits.
  bool Arrived(uint64_t tag, uint64_t tag_mask);

  // One round of ucp_worker_progress; true if it made progress.
  bool Progress();
  UcxErrorMode error_mode() const { return options_.error_mode; }
  const UcxWorkerOptions& options() const { return options_; }
  // UCX's description of the worker and its transports (ucp_worker_print_info).
  std::string DescribeTransports() const;

 private:
  struct Handles;
  UcxWorker(UcxWorkerOptions options, std::unique_ptr<Handles> handles, std::string address);
  // Waits for `request` (a send or receive) until done, the deadline or the
  // failure of `watch`; see ucx_transfer.cc.
  struct Outcome;
  Outcome Wait(void* request, bool is_recv, absl::Time deadline, UcxEndpointState* watch);
  // Receives a probed message (a ucp_tag_message_h) into `data` (null: no buffer).
  Outcome ReceiveProbed(void* message, void* data, size_t capacity, absl::Time deadline, UcxEndpointState* watch);

  UcxWorkerOptions options_;
  std::unique_ptr<Handles> handles_;
  std::string address_;
  std::vector<std::weak_ptr<UcxEndpointState>> endpoints_;
};

}  // namespace seam::handoff

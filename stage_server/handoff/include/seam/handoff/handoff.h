// The pipeline handoff protocol over a UcxWorker: a StreamState header, then
// each tensor's bytes, all tagged by microbatch (see handoff_tag.h). With a
// key, the header carries an HMAC-SHA256 over itself (its payload CRCs
// included). The receiver bounds every size from the wire before it
// allocates, drops messages it cannot trust without shifting the stream, and
// verifies every field and checksum before it returns any tensor.
// A header names how its payloads travel (StreamState.transport): after it
// over UCX (HOST_UCX, the default), or in a device link's slot (CUDA_IPC),
// which the receiver takes through the PayloadSource it was given for that
// transport (device_handoff.h); the header checks are the same for both.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "seam/core/tensor.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

struct HandoffSenderOptions {
  // The epoch's handoff key, shared with the receiver: each header is sent
  // with its HMAC-SHA256 under it. Empty sends no MAC (tests of the keyless
  // protocol only).
  std::string key;
  // Test hook: called with each tensor's payload after its checksum has been
  // computed. When set, a copy of the payload is sent, which the hook may alter.
  std::function<void(size_t index, std::vector<char>& payload)> after_checksum;
};

// Sends handoffs to one receiver. Uses the worker from its thread only.
class HandoffSender {
 public:
  HandoffSender(UcxWorker& worker, UcxEndpoint& to_receiver, HandoffSenderOptions options = {})
      : worker_(worker), endpoint_(to_receiver), options_(std::move(options)) {}

  // Fills one TensorDesc per tensor (name, dtype, shape, byte_size, crc32c)
  // into a copy of `header` (which must list no tensors; its mac is
  // replaced), seals it with its MAC under the key, sends it, then the
  // tensors in order. Tensors must be contiguous host tensors with distinct,
  // non-empty names. Errors: INVALID_ARGUMENT for bad input; INTERNAL if the
  // header does not serialize or OpenSSL fails; UNAVAILABLE /
  // DEADLINE_EXCEEDED from the transport, annotated with what was being sent.
  absl::Status Send(const v1::StreamState& header, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    absl::Time deadline);

 private:
  UcxWorker& worker_;
  UcxEndpoint& endpoint_;
  HandoffSenderOptions options_;
};

// A tensor the receiver expects; a shape entry of -1 accepts any size there.
struct ExpectedTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

struct HandoffExpectation {
  uint64_t microbatch_id = 0;
  uint64_t sequence_number = 0;
  uint64_t epoch = 0;
  // The tensors, in order, that the header must list.
  std::vector<ExpectedTensor> tensors;
  // When set, replaces the `tensors` check: called with the header (its
  // descriptors already checked for self-consistency); a non-OK result
  // rejects the handoff and is returned with the microbatch named.
  std::function<absl::Status(const v1::StreamState&)> validator;
  // When set, polled about every 50 ms while no header has come: a non-OK
  // result ends the wait with that status (the stage reloads or drains), so
  // a wait on a stopped neighbour never holds a stage up to its deadline.
  std::function<absl::Status()> interrupted;
};

// Messages a HandoffReceiver took off the wire and discarded while it waited
// for the header it expects, by reason; none of them ends or shifts a
// Receive. Cumulative over the receiver's life.
struct HandoffDrops {
  uint64_t bad_mac = 0;    // no MAC, or one that does not verify under the key
  uint64_t oversized = 0;  // longer than max_header_bytes, or listing more than max_payload_bytes
  uint64_t malformed = 0;  // not a StreamState, inconsistent descriptors, id unlike its tag's
  uint64_t unexpected_microbatch = 0;  // a sound header for another microbatch (a late one)
  uint64_t total() const { return bad_mac + oversized + malformed + unexpected_microbatch; }
};

struct ReceivedHandoff {
  v1::StreamState header;
  std::vector<Tensor> tensors;  // host tensors, in descriptor order
};

// Where the payloads of headers of another transport than HOST_UCX come
// from (DeviceHandoffReceiver for CUDA_IPC). Called by HandoffReceiver on
// its thread, with headers whose MAC and descriptors were checked.
class PayloadSource {
 public:
  virtual ~PayloadSource() = default;
  // The payloads of an accepted header, each verified, in descriptor order.
  // Errors as HandoffReceiver::Receive's for payloads (INVALID_ARGUMENT for
  // placement the link cannot hold, DATA_LOSS for a checksum).
  virtual absl::StatusOr<std::vector<Tensor>> Take(const v1::StreamState& header, absl::Time deadline) = 0;
  // Lets go of the payloads of a header that is rejected or late, unread.
  virtual void Discard(const v1::StreamState& header, absl::Time deadline) = 0;
};

struct HandoffReceiverOptions {
  // The epoch's handoff key (see HandoffSenderOptions::key). When set, a
  // header without a MAC that verifies under it is dropped. Empty checks no
  // MAC (tests of the keyless protocol only).
  std::string key;
  // Longest header message taken off the wire; a longer one is dropped
  // without allocating its length.
  size_t max_header_bytes = 64 * 1024;
  // Most payload bytes one handoff may list (sum of its tensors'
  // byte_size), checked before anything is allocated for them. The stage
  // sets it from the model's shapes and its batch limits; the default only
  // bounds a receiver that does not.
  uint64_t max_payload_bytes = uint64_t{4} << 30;
  // After a rejection, how long the receiver keeps taking the rejected
  // handoff's payloads off the wire so they do not linger in UCX.
  absl::Duration drain_timeout = absl::Milliseconds(200);
  // Payloads land in host staging memory (core/host_staging.h), reused from
  // handoff to handoff; page-locked when set (a receiver that copies them
  // onto a GPU next) and a GPU is visible.
  bool page_locked = false;
  // Takes the payloads of CUDA_IPC headers (not owned; may be set later
  // through set_device_payloads). Without it such a header is refused with
  // INVALID_ARGUMENT.
  PayloadSource* device_payloads = nullptr;
};

// Receives handoffs from one sender. Uses the worker from its thread only.
class HandoffReceiver {
 public:
  // `from_sender` (optional, PEER mode): an endpoint to the producer whose
  // failure ends a waiting Receive with UNAVAILABLE instead of a timeout.
  explicit HandoffReceiver(UcxWorker& worker, const UcxEndpoint* from_sender = nullptr,
                           HandoffReceiverOptions options = {})
      : worker_(worker), watch_(from_sender), options_(std::move(options)) {}

  // Takes header messages off the wire until one is a sound header of
  // `expected.microbatch_id`: a header that is oversized, malformed, fails
  // its MAC or is for another microbatch is dropped and counted (drops())
  // and the wait goes on. The expected header is then checked against
  // `expected` and each tensor received and verified. Errors name the field:
  //   FAILED_PRECONDITION  sequence_number or epoch differ
  //   INVALID_ARGUMENT     tensor count, name, dtype, shape or byte count
  //                        differ from what is expected; a payload longer
  //                        or shorter than its descriptor
  //   DATA_LOSS            a payload's CRC-32C (or device checksum) differs
  //                        from the header's
  //   INVALID_ARGUMENT     also: a transport this receiver has no source for
  //   DEADLINE_EXCEEDED / UNAVAILABLE from the transport; the message then
  //                        says how many messages were dropped and the last
  //                        reason, if any were
  // No tensor is returned unless every tensor of the handoff was verified.
  absl::StatusOr<ReceivedHandoff> Receive(const HandoffExpectation& expected, absl::Time deadline);

  const HandoffDrops& drops() const { return drops_; }
  // The source of CUDA_IPC payloads from now on (null: none).
  void set_device_payloads(PayloadSource* source) { options_.device_payloads = source; }

 private:
  // Counts a dropped message under `counter` (a field of drops_) and
  // remembers why, for the error of a wait that ends without a header.
  void Drop(uint64_t& counter, absl::string_view why);
  // Checks a sound header of the expected microbatch against `expected`,
  // then receives and verifies its tensors.
  absl::StatusOr<ReceivedHandoff> ReceiveExpected(const HandoffExpectation& expected, v1::StreamState header,
                                                  absl::Time deadline);
  // Whether a header's payloads are in a device link's slot.
  static bool OnDevice(const v1::StreamState& header);
  // OK for a transport this receiver takes; INVALID_ARGUMENT otherwise.
  absl::Status CheckTransport(const v1::StreamState& header, const std::string& where) const;
  // Lets go of a rejected or late header's payloads, wherever they are.
  void Discard(const v1::StreamState& header, absl::Time deadline);
  // Takes tensors [first, count) of a rejected handoff off the wire, into no
  // buffer, until `deadline` (at most drain_timeout from now).
  void Drain(uint64_t microbatch_id, size_t first, size_t count, absl::Time deadline);

  UcxWorker& worker_;
  const UcxEndpoint* watch_;
  HandoffReceiverOptions options_;
  HandoffDrops drops_;
  std::string last_drop_;
};

}  // namespace seam::handoff

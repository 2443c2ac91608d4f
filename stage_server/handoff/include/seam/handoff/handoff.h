// The pipeline handoff protocol over a UcxWorker: a StreamState header, then
// each tensor's bytes, all under the epoch's link tag (handoff_tag.h). With
// a key, the header carries an HMAC-SHA256 over itself, and each payload a
// Poly1305 MAC (TensorDesc.mac) keyed from the epoch's key and a nonce in
// the header; without one (tests of the keyless protocol) payloads carry a
// CRC-32C. The receiver bounds every size from the wire before it
// allocates, drops messages it cannot trust without shifting the stream
// (a payload that does not verify is dropped and the real one awaited),
// takes strays off the wire while it waits (stray_drain.h), and verifies
// every field and payload before it returns any tensor.
// A header names how its payloads travel (StreamState.transport): after it
// over UCX (HOST_UCX, the default), or in a device link's slot (CUDA_IPC),
// which the receiver takes through the PayloadSource it was given for that
// transport (device_handoff.h); the header checks are the same for both.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
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
  // with its HMAC-SHA256 under it, each payload with its Poly1305 MAC, all
  // under the key's link tag. Empty sends no MAC and CRC-32Cs instead (tests
  // of the keyless protocol only).
  std::string key;
  // Test hook: called with each tensor's payload after its checksum has been
  // computed. When set, a copy of the payload is sent, which the hook may alter.
  std::function<void(size_t index, std::vector<char>& payload)> after_checksum;
};

class PayloadMac;

// Sends handoffs to one receiver. Uses the worker from its thread only.
class HandoffSender {
 public:
  HandoffSender(UcxWorker& worker, UcxEndpoint& to_receiver, HandoffSenderOptions options = {});
  ~HandoffSender();
  HandoffSender(HandoffSender&&) noexcept;

  // Fills one TensorDesc per tensor (name, dtype, shape, byte_size, and its
  // MAC with a key or its crc32c without) into a copy of `header` (which
  // must list no tensors; its mac and payload_nonce are replaced), seals it
  // with its MAC under the key, sends it, then the tensors in order. Tensors
  // must be contiguous host tensors with distinct, non-empty names. Errors:
  // INVALID_ARGUMENT for bad input; INTERNAL if the header does not
  // serialize or OpenSSL fails; UNAVAILABLE / DEADLINE_EXCEEDED from the
  // transport, annotated with what was being sent.
  absl::Status Send(const v1::StreamState& header, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    absl::Time deadline);

 private:
  // The link tag and payload MAC of the key, made at the first Send.
  absl::Status Prepare();

  UcxWorker& worker_;
  UcxEndpoint& endpoint_;
  HandoffSenderOptions options_;
  bool prepared_ = false;
  uint64_t link_ = 0;
  std::unique_ptr<PayloadMac> payload_mac_;  // null without a key
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
  // When set, polled every drain_interval while the header, or a host
  // payload after it, has not begun to arrive: a non-OK result ends the wait
  // with that status (the stage reloads or drains), so a wait on a stopped
  // neighbour, or on one that died between a header and its payload, never
  // holds a stage up to its deadline. A payload that has begun to arrive is
  // received whole (a receive cut mid-transfer could not release its buffer);
  // CUDA_IPC payloads (PayloadSource::Take) are not polled.
  std::function<absl::Status()> interrupted;
};

// Messages a HandoffReceiver (or a stray drain) took off the wire and
// discarded, by reason; none of them ends or shifts a Receive. Cumulative
// over the receiver's life. The fields of seam.v1.HandoffDrops.
struct HandoffDrops {
  uint64_t bad_mac = 0;    // no MAC, or one that does not verify under the key
  uint64_t oversized = 0;  // longer than max_header_bytes, or listing more than max_payload_bytes
  uint64_t malformed = 0;  // not a StreamState, inconsistent descriptors, no payload MAC with a key
  uint64_t unexpected_microbatch = 0;  // a sound header for another microbatch (a late one)
  uint64_t unknown_peer = 0;  // a handoff kind under another link tag (no key, another key)
  uint64_t unknown_kind = 0;  // a tag kind the handoff does not use
  uint64_t bad_payload = 0;   // under the link's tag, but not the length or MAC its header announced
  uint64_t stale_epoch = 0;   // under the previous epoch's link tag
  uint64_t incomplete = 0;    // its transfer failed mid-message (a sender gone)
  uint64_t total() const {
    return bad_mac + oversized + malformed + unexpected_microbatch + unknown_peer + unknown_kind + bad_payload +
           stale_epoch + incomplete;
  }
  HandoffDrops& operator+=(const HandoffDrops& other);
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
  // The previous epoch's key ("" none): strays under its link tag count as
  // stale_epoch rather than unknown_peer.
  std::string previous_key;
  // While a receive waits, strays are taken off the wire at least this often.
  absl::Duration drain_interval = absl::Milliseconds(20);
  // Most sound headers Poll holds ahead of their Receive.
  size_t max_held_headers = 64;
};

// Receives handoffs from one sender. Uses the worker from its thread only.
class HandoffReceiver {
 public:
  // `from_sender` (optional, PEER mode): an endpoint to the producer whose
  // failure ends a waiting Receive with UNAVAILABLE instead of a timeout.
  explicit HandoffReceiver(UcxWorker& worker, const UcxEndpoint* from_sender = nullptr,
                           HandoffReceiverOptions options = {});
  ~HandoffReceiver();
  HandoffReceiver(HandoffReceiver&&) noexcept;

  // Takes header messages of the link off the wire until one is a sound
  // header of `expected.microbatch_id`: a header that is oversized,
  // malformed, fails its MAC, is for another microbatch or whose transfer
  // fails is dropped and counted (drops()) and the wait goes on; strays are
  // drained meanwhile. The expected header is then checked against
  // `expected` and each payload received and verified: one of the wrong
  // length or whose MAC does not verify is dropped (bad_payload) and the
  // next one under its tag awaited. Errors name the field:
  //   FAILED_PRECONDITION  sequence_number or epoch differ
  //   INVALID_ARGUMENT     tensor count, name, dtype, shape or byte count
  //                        differ from what is expected; without a key, a
  //                        payload longer or shorter than its descriptor
  //   DATA_LOSS            without a key, a payload's CRC-32C differs from
  //                        the header's; a device checksum differs
  //   INVALID_ARGUMENT     also: a transport this receiver has no source for
  //   DEADLINE_EXCEEDED / UNAVAILABLE from the transport; the message then
  //                        says how many messages were dropped and the last
  //                        reason, if any were
  //   INTERNAL             OpenSSL failed
  // No tensor is returned unless every tensor of the handoff was verified.
  absl::StatusOr<ReceivedHandoff> Receive(const HandoffExpectation& expected, absl::Time deadline);

  // Takes the strays on the wire now (stray_drain.h) into drops().
  void DrainStrays();
  // While the stage is idle: drains strays (every drain_interval), and takes the link's headers
  // that have arrived. A sound one for a descriptor at or before sequence
  // number `answered_through` (one this stage has answered: it gave up on
  // it) is late and dropped with its payloads, so its sender's sends
  // complete; the others are held (at most max_held_headers) for the
  // Receive that expects them. Never waits (beyond a late handoff's drain).
  void Poll(uint64_t answered_through);

  const HandoffDrops& drops() const { return drops_; }
  // The source of CUDA_IPC payloads from now on (null: none).
  void set_device_payloads(PayloadSource* source) { options_.device_payloads = source; }

 private:
  // The link tags and payload MAC of the keys, made at the first use.
  absl::Status Prepare();
  // Drains strays when drain_interval has passed since the last drain.
  void MaybeDrainStrays();
  // The header those bytes hold when it is sound; otherwise counts why not.
  std::optional<v1::StreamState> Sound(absl::StatusOr<std::vector<char>> bytes);
  // The next sound header, held or off the wire, until `deadline`.
  absl::StatusOr<v1::StreamState> NextSoundHeader(const HandoffExpectation& expected, absl::Time deadline,
                                                  uint64_t dropped_before);
  // Receives payload `index` of `header` into `data` (byte_size bytes),
  // dropping candidates that do not verify, until `deadline` or until
  // `interrupted` (if set) turns non-OK before the payload began to arrive.
  absl::Status ReceivePayload(const v1::StreamState& header, int index, void* data, absl::Time deadline,
                              const std::function<absl::Status()>& interrupted);
  // Until payload `tag` begins to arrive: polls `interrupted` every
  // drain_interval and returns its first non-OK status. OK once the payload
  // is there, at `deadline`, or when the watched peer failed (the receive
  // that follows reports those).
  absl::Status AwaitPayload(uint64_t tag, absl::Time deadline, const std::function<absl::Status()>& interrupted);
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
  void Drain(size_t first, size_t count, absl::Time deadline);

  UcxWorker& worker_;
  const UcxEndpoint* watch_;
  HandoffReceiverOptions options_;
  HandoffDrops drops_;
  std::string last_drop_;
  bool prepared_ = false;
  uint64_t link_ = 0;
  std::optional<uint64_t> previous_link_;
  std::unique_ptr<PayloadMac> payload_mac_;  // null without a key
  absl::Time last_drain_ = absl::InfinitePast();
  std::deque<v1::StreamState> held_;  // sound headers Poll took ahead of their Receive
};

}  // namespace seam::handoff

// Device handoffs between the GPUs of one host: a pipeline link whose
// payloads go GPU to GPU through CUDA IPC while the StreamState header still
// travels over UCX (HMAC, epoch, microbatch id, sequence number as for any
// handoff), naming the slot that holds the payloads and their checksums.
//
// Producer (DeviceHandoffSender): owns a ring of `slots` (≥ 2) buffers of
// slot_bytes (plus a 256-byte trailer) on each lane's GPU (lane = TP rank),
// allocated with cudaMalloc, and one interprocess event per slot; it
// exports their IPC handles once, in the DeviceLinkOffer that its host
// headers carry until the consumer answers. Per handoff it takes the next
// slot (waiting, bounded, for the consumer's release of its previous use),
// enqueues on each lane's own stream one kernel that copies the lane's
// tensors into the slot and sums their device checksum (device_checksum.h;
// a fresh seed per handoff) into the slot's trailer, records the slot's
// event, and sends the sealed header (transport CUDA_IPC, DeviceSlot, each
// tensor's lane and offset) without waiting for the kernel: the producer's
// host never waits on a handoff. The tensors stay referenced (their memory
// is not reused) until the slot's next use, when the copy is known done; a
// fault of a copy breaks the link at the next Send.
//
// Consumer (DeviceHandoffReceiver, a HandoffReceiver's PayloadSource for
// CUDA_IPC): weighs an offer with the transport table (handoff_transport.h),
// opens the handles once (a failure declines the link: the host path stays),
// and answers. Per header it checks the link, slot and placement, makes its
// lane streams wait for the slot's event, runs the same kernel from the
// producer's slot (peer-to-peer over UVA) into tensors of its own on each
// lane's GPU, reading the producer's checksum from the trailer as it ends,
// waits (bounded) for both sums — the hop's one host wait — compares them
// (DATA_LOSS when they differ), and releases the slot with a
// DeviceLinkReply, also for a header it rejects or that came late. A
// forged or stale reply is dropped and counted, never frees a slot. A copy
// that misses its deadline leaves the link broken (its memory may still be
// written): later device headers fail with FAILED_PRECONDITION. The
// checksum detects corruption in flight; who may write the slots at all is
// bounded by the IPC handles, which travel only in sealed headers.
//
// Threading: each object is used from one thread (the worker's). Both ends
// need the CUDA path; without it Create returns FAILED_PRECONDITION and the
// link stays on the host path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/core/tensor.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_transport.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

struct DeviceLinkOptions {
  std::vector<int> devices;  // lane i's GPU (CUDA ordinal in this process)
  uint64_t slot_bytes = 0;   // producer: bytes of each slot of each lane
  int slots = 2;             // producer: slots per lane, at least 2
  std::string key;           // the epoch's handoff key (headers and replies are sealed under it)
  uint64_t epoch = 0;        // replies name it; a reply of another epoch is dropped
  // Test hook (producer): in the link's first device handoff, after the
  // checksums, flip this byte of lane 0's slot (an offset in the slot; -1:
  // never), as a corruption in flight.
  int64_t flip_byte_after_checksum = -1;
};

// Replies a producer took off the wire and dropped, by reason. Cumulative.
struct DeviceLinkDrops {
  uint64_t bad_mac = 0;    // no MAC, or one that does not verify
  uint64_t malformed = 0;  // not a DeviceLinkReply, or oversized
  uint64_t stale = 0;      // another link or epoch, or a release of a slot use not outstanding
};

class DeviceHandoffSender {
 public:
  enum class Answer { kPending, kAccepted, kDeclined };

  // Allocates the rings and exports their handles. INVALID_ARGUMENT for bad
  // options; FAILED_PRECONDITION without the CUDA path; CUDA errors naming the call.
  static absl::StatusOr<std::unique_ptr<DeviceHandoffSender>> Create(UcxWorker& worker, UcxEndpoint& to_receiver,
                                                                     DeviceLinkOptions options);
  virtual ~DeviceHandoffSender() = default;

  // What the producer's host headers carry until answered.
  virtual const v1::DeviceLinkOffer& offer() const = 0;
  // Takes the replies already on the wire (an answer, releases), without waiting.
  virtual void Poll() = 0;
  virtual Answer answer() const = 0;
  virtual const std::string& answer_reason() const = 0;  // the consumer's reason
  // OK when Send can carry these tensors: each contiguous on a lane's GPU,
  // each lane's tensors (offsets rounded up to 256 bytes) within slot_bytes,
  // at most 8 on a lane; FAILED_PRECONDITION naming what does not fit.
  virtual absl::Status Fits(const std::vector<std::pair<std::string, Tensor>>& tensors) const = 0;
  // Sends one handoff through the next slot (see above). `header` lists no
  // tensors. FAILED_PRECONDITION before the link is accepted or for tensors
  // that do not fit; DEADLINE_EXCEEDED when the slot's release (or, after
  // a discard, its previous copy) or the header send misses `deadline`;
  // UNAVAILABLE from the transport; a CUDA error of an earlier copy.
  virtual absl::Status Send(const v1::StreamState& header,
                            const std::vector<std::pair<std::string, Tensor>>& tensors, absl::Time deadline) = 0;
  virtual DeviceLinkDrops drops() const = 0;
};

class DeviceHandoffReceiver : public PayloadSource {
 public:
  // `to_sender`: where replies go. FAILED_PRECONDITION without the CUDA path.
  static absl::StatusOr<std::unique_ptr<DeviceHandoffReceiver>> Create(UcxWorker& worker, UcxEndpoint& to_sender,
                                                                       DeviceLinkOptions options);
  ~DeviceHandoffReceiver() override = default;

  // This consumer's side of the transport table (its lanes' reachable GPUs).
  virtual const ConsumerFacts& facts() const = 0;
  // Answers an offer (once per link id; a repeated offer returns the first
  // choice without replying again): chooses from the transport table, opens
  // the handles when CUDA_IPC is chosen (falling back to HOST_UCX when that
  // fails), and sends the answer. An error is the reply's send failing.
  virtual absl::StatusOr<TransportChoice> Answer(const v1::DeviceLinkOffer& offer, absl::Time deadline) = 0;
  // CUDA_IPC once a link was accepted, HOST_UCX before.
  virtual v1::HandoffTransport transport() const = 0;
  // Per lane, the verified checksum of the last handoff Take returned (0 for
  // a lane it did not use); empty before one.
  virtual const std::vector<uint64_t>& last_checksums() const = 0;
};

// Sends a sealed reply (a decline from a consumer without a
// DeviceHandoffReceiver, say). Errors from the transport or OpenSSL.
absl::Status SendDeviceLinkReply(UcxWorker& worker, UcxEndpoint& to_sender, const v1::DeviceLinkReply& reply,
                                 absl::string_view handoff_key, absl::Time deadline);

}  // namespace seam::handoff

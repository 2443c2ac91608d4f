// The pipeline handoff protocol over a UcxWorker: a StreamState header, then
// each tensor's bytes, all tagged by microbatch (see handoff_tag.h). The
// receiver verifies every field and checksum before it returns any tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/core/tensor.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

struct HandoffSenderOptions {
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
  // into a copy of `header` (which must list no tensors), sends it, then the
  // tensors in order. Tensors must be contiguous host tensors with distinct,
  // non-empty names. Errors: INVALID_ARGUMENT for bad input; UNAVAILABLE /
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
};

struct ReceivedHandoff {
  v1::StreamState header;
  std::vector<Tensor> tensors;  // host tensors, in descriptor order
};

struct HandoffReceiverOptions {
  // After a rejection, how long the receiver keeps taking the rejected
  // handoff's payloads off the wire so they do not linger in UCX.
  absl::Duration drain_timeout = absl::Milliseconds(200);
  // Payloads land in host staging memory (core/host_staging.h), reused from
  // handoff to handoff; page-locked when set (a receiver that copies them
  // onto a GPU next) and a GPU is visible.
  bool page_locked = false;
};

// Receives handoffs from one sender. Uses the worker from its thread only.
class HandoffReceiver {
 public:
  // `from_sender` (optional, PEER mode): an endpoint to the producer whose
  // failure ends a waiting Receive with UNAVAILABLE instead of a timeout.
  explicit HandoffReceiver(UcxWorker& worker, const UcxEndpoint* from_sender = nullptr,
                           HandoffReceiverOptions options = {})
      : worker_(worker), watch_(from_sender), options_(options) {}

  // Takes the next handoff header off the wire and checks it against
  // `expected`, then receives and verifies each tensor. Errors name the field:
  //   FAILED_PRECONDITION  microbatch_id, sequence_number or epoch differ
  //   INVALID_ARGUMENT     header does not parse; tensor count, name, dtype,
  //                        shape or byte count differ from what is expected
  //   DATA_LOSS            a payload's CRC-32C differs from its descriptor
  //   DEADLINE_EXCEEDED / UNAVAILABLE from the transport
  // No tensor is returned unless every tensor of the handoff was verified.
  absl::StatusOr<ReceivedHandoff> Receive(const HandoffExpectation& expected, absl::Time deadline);

 private:
  // Takes tensors [first, count) of a rejected handoff off the wire.
  void Drain(uint64_t microbatch_id, size_t first, size_t count);

  UcxWorker& worker_;
  const UcxEndpoint* watch_;
  HandoffReceiverOptions options_;
};

}  // namespace seam::handoff

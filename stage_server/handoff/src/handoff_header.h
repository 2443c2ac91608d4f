// The handoff header as it travels: a serialized seam.v1.StreamState, sealed
// with its MAC when the pipeline has a key. The sender seals; the receiver
// checks raw wire bytes here before it trusts any field. Internal to
// seam_handoff (the fuzz target and its corpus replay drive CheckHeaderBytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff {

struct HeaderLimits {
  // Wire bytes one header may take.
  size_t max_header_bytes = 64 * 1024;
  // Sum of the byte_size of the tensors one header may list.
  uint64_t max_payload_bytes = uint64_t{4} << 30;
};

// `header` (its `mac` ignored) serialized and sealed under `key`; plain
// serialized bytes when `key` is empty. INTERNAL if it does not serialize.
absl::StatusOr<std::string> SealHeader(const v1::StreamState& header, absl::string_view key);

// Checks bytes as they came off the wire, in this order, and returns the
// header they hold (without its mac). The code says why a header is refused:
//   OUT_OF_RANGE       more than max_header_bytes, or the tensors listed
//                      add up to more than max_payload_bytes
//   PERMISSION_DENIED  `key` is set and the bytes carry no MAC field at
//                      their end, or the MAC does not verify
//   INVALID_ARGUMENT   not a StreamState; more than kMaxHandoffTensors
//                      tensors; a tensor name empty or repeated; a
//                      descriptor inconsistent (see CheckDescriptor)
// Never allocates more than a small multiple of the input's size.
absl::StatusOr<v1::StreamState> CheckHeaderBytes(absl::string_view wire, absl::string_view key,
                                                 const HeaderLimits& limits);

// The descriptor checks of CheckHeaderBytes on a parsed header; `where`
// prefixes messages.
absl::Status CheckDescriptors(const v1::StreamState& header, uint64_t max_payload_bytes, const std::string& where);

}  // namespace seam::handoff

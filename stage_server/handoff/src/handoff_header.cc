// Sealing and checking handoff headers as wire bytes: size bound, MAC,
// parse, then the descriptors on their own (count, names, sizes, total).
#include "src/handoff_header.h"

#include <limits>
#include <set>

#include "seam/core/status.h"
#include "seam/handoff/handoff_tag.h"
#include "src/header_mac.h"
#include "src/tensor_desc.h"

namespace seam::handoff {

absl::StatusOr<std::string> SealHeader(const v1::StreamState& header, absl::string_view key) {
  std::string bytes;
  bool serialized = false;
  if (header.mac().empty()) {
    serialized = header.SerializeToString(&bytes);
  } else {
    v1::StreamState unsealed = header;
    unsealed.clear_mac();
    serialized = unsealed.SerializeToString(&bytes);
  }
  if (!serialized) {
    return absl::InternalError(
        absl::StrCat("StreamState header of microbatch ", header.microbatch_id(), " does not serialize"));
  }
  return SealHeaderBytes(std::move(bytes), key);
}

absl::Status CheckDescriptors(const v1::StreamState& header, uint64_t max_payload_bytes, const std::string& where) {
  if (static_cast<size_t>(header.tensors_size()) > kMaxHandoffTensors) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": header lists ", header.tensors_size(), " tensors"));
  }
  std::set<std::string> names;
  uint64_t total = 0;
  for (const v1::TensorDesc& desc : header.tensors()) {
    const std::string what = absl::StrCat(where, ": tensor '", desc.name(), "'");
    if (desc.name().empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": a tensor has an empty name"));
    if (!names.insert(desc.name()).second) return absl::InvalidArgumentError(absl::StrCat(what, " appears twice"));
    SEAM_RETURN_IF_ERROR(CheckDescriptor(desc, what));
    if (desc.byte_size() > max_payload_bytes - total) {
      return absl::OutOfRangeError(absl::StrCat(where, ": tensors up to '", desc.name(), "' take more than ",
                                                max_payload_bytes, " bytes (max_payload_bytes)"));
    }
    total += desc.byte_size();
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::StreamState> CheckHeaderBytes(absl::string_view wire, absl::string_view key,
                                                 const HeaderLimits& limits) {
  const std::string what = absl::StrCat("header of ", wire.size(), " bytes");
  if (wire.size() > limits.max_header_bytes) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " is longer than ", limits.max_header_bytes, " bytes (max_header_bytes)"));
  }
  absl::string_view body = wire;
  if (!key.empty()) {
    absl::string_view mac;
    if (!SplitMacField(wire, &body, &mac)) {
      return absl::PermissionDeniedError(absl::StrCat(what, " carries no MAC; the receiver has a key"));
    }
    SEAM_ASSIGN_OR_RETURN(std::string expected, HeaderMac(key, body));
    if (!MacEquals(mac, expected)) {
      return absl::PermissionDeniedError(absl::StrCat(what, ": MAC does not verify under the receiver's key"));
    }
  }
  if (body.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::OutOfRangeError(absl::StrCat(what, " is too long to parse"));
  }
  v1::StreamState header;
  if (!header.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, " does not parse as seam.v1.StreamState"));
  }
  if (!key.empty() && !header.mac().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": MAC'd bytes hold a second mac field"));
  }
  header.clear_mac();
  SEAM_RETURN_IF_ERROR(CheckDescriptors(header, limits.max_payload_bytes,
                                        absl::StrCat("header of microbatch ", header.microbatch_id())));
  return header;
}

}  // namespace seam::handoff

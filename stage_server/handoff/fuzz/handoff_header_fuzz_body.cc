// Properties of CheckHeaderBytes on arbitrary bytes; see the header.
#include "fuzz/handoff_header_fuzz_body.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::handoff::fuzz {
namespace {

bool DocumentedRefusal(absl::StatusCode code) {
  return code == absl::StatusCode::kOutOfRange || code == absl::StatusCode::kPermissionDenied ||
         code == absl::StatusCode::kInvalidArgument;
}

absl::Status CheckUnder(absl::string_view wire, absl::string_view key) {
  const std::string which = key.empty() ? "without a key" : "under the key";
  absl::StatusOr<v1::StreamState> header = CheckHeaderBytes(wire, key, kFuzzLimits);
  if (!header.ok()) {
    if (DocumentedRefusal(header.status().code())) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(which, ": undocumented refusal ", header.status().ToString()));
  }
  if (!header->mac().empty()) return absl::InternalError(absl::StrCat(which, ": accepted header keeps its mac"));
  uint64_t total = 0;
  for (const v1::TensorDesc& desc : header->tensors()) total += desc.byte_size();
  if (total > kFuzzLimits.max_payload_bytes) {
    return absl::InternalError(absl::StrCat(which, ": accepted header lists ", total, " payload bytes"));
  }
  absl::StatusOr<std::string> sealed = SealHeader(*header, key);
  if (!sealed.ok()) return absl::InternalError(absl::StrCat(which, ": reseal failed: ", sealed.status().ToString()));
  if (sealed->size() > kFuzzLimits.max_header_bytes) return absl::OkStatus();  // unknown fields may grow it
  absl::StatusOr<v1::StreamState> again = CheckHeaderBytes(*sealed, key, kFuzzLimits);
  if (!again.ok()) {
    return absl::InternalError(absl::StrCat(which, ": resealed header refused: ", again.status().ToString()));
  }
  if (again->SerializeAsString() != header->SerializeAsString()) {
    return absl::InternalError(absl::StrCat(which, ": resealed header checks back to a different header"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckHeaderProperties(absl::string_view wire) {
  absl::Status plain = CheckUnder(wire, "");
  if (!plain.ok()) return plain;
  return CheckUnder(wire, kFuzzKey);
}

}  // namespace seam::handoff::fuzz

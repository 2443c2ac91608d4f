// Properties of CheckDescriptor on arbitrary bytes; see the header.
#include "fuzz/tensor_desc_fuzz_body.h"

#include "absl/strings/str_cat.h"
#include "seam/v1/tensor.pb.h"
#include "src/tensor_desc.h"

namespace seam::handoff::fuzz {

absl::StatusCode DescriptorCode(absl::string_view bytes) {
  v1::TensorDesc desc;
  if (!desc.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return absl::StatusCode::kInvalidArgument;
  return CheckDescriptor(desc, "fuzz").code();
}

absl::Status CheckDescriptorProperties(absl::string_view bytes) {
  v1::TensorDesc desc;
  if (!desc.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return absl::OkStatus();
  const absl::Status status = CheckDescriptor(desc, "fuzz");
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kInvalidArgument) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("undocumented refusal ", status.ToString()));
  }
  absl::StatusOr<DType> dtype = FromWireDType(desc.dtype());
  if (!dtype.ok()) return absl::InternalError(absl::StrCat("accepted unknown dtype ", desc.dtype()));
  // The byte count in 128 bits: a wrapped 64-bit product must not pass.
  unsigned __int128 bytes_needed = DTypeSize(*dtype);
  for (int64_t d : desc.shape()) {
    if (d < 0) return absl::InternalError(absl::StrCat("accepted negative dimension ", d));
    bytes_needed *= static_cast<uint64_t>(d);
    if (bytes_needed > (static_cast<unsigned __int128>(1) << 64)) bytes_needed = static_cast<unsigned __int128>(1) << 64;
  }
  if (bytes_needed != desc.byte_size()) {
    return absl::InternalError(absl::StrCat("accepted byte_size ", desc.byte_size(), " unlike its shape"));
  }
  return absl::OkStatus();
}

}  // namespace seam::handoff::fuzz

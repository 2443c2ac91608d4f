// HandoffSender: describes each tensor (with its CRC-32C) in the StreamState
// header, seals the header with its MAC, sends it, then the tensor payloads,
// all tagged by microbatch.
#include <cstring>
#include <set>

#include "seam/core/status.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/handoff_header.h"
#include "src/tensor_desc.h"

namespace seam::handoff {

absl::Status HandoffSender::Send(const v1::StreamState& header,
                                 const std::vector<std::pair<std::string, Tensor>>& tensors, absl::Time deadline) {
  const uint64_t microbatch = header.microbatch_id();
  const std::string where = absl::StrCat("handoff of microbatch ", microbatch);
  if (header.tensors_size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": header already lists ", header.tensors_size(), " tensors; the sender fills them"));
  }
  if (tensors.size() > kMaxHandoffTensors) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", tensors.size(), " tensors, at most ", kMaxHandoffTensors, " fit the tag layout"));
  }
  v1::StreamState full = header;
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    const std::string what = absl::StrCat(where, ": tensor '", name, "'");
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": a tensor has an empty name"));
    if (!names.insert(name).second) return absl::InvalidArgumentError(absl::StrCat(what, " appears twice"));
    SEAM_RETURN_IF_ERROR(ExpectDefined(tensor, what.c_str()));
    SEAM_RETURN_IF_ERROR(ExpectDevice(tensor, Device::CPU(), what.c_str()));
    SEAM_RETURN_IF_ERROR(ExpectContiguous(tensor, what.c_str()));
    *full.add_tensors() = DescribeTensor(name, tensor);
  }
  SEAM_ASSIGN_OR_RETURN(const std::string bytes, SealHeader(full, options_.key));
  SEAM_RETURN_IF_ERROR(Annotate(worker_.Send(endpoint_, HeaderTag(microbatch), bytes.data(), bytes.size(), deadline),
                                absl::StrCat(where, ": header")));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i].second;
    const void* data = tensor.nbytes() > 0 ? tensor.raw_data() : nullptr;
    std::vector<char> altered;
    if (options_.after_checksum) {
      altered.resize(tensor.nbytes());
      if (!altered.empty()) std::memcpy(altered.data(), data, altered.size());
      options_.after_checksum(i, altered);
      data = altered.data();
    }
    const size_t size = options_.after_checksum ? altered.size() : tensor.nbytes();
    SEAM_RETURN_IF_ERROR(Annotate(worker_.Send(endpoint_, TensorTag(microbatch, i), data, size, deadline),
                                  absl::StrCat(where, ": tensor '", tensors[i].first, "'")));
  }
  return absl::OkStatus();
}

}  // namespace seam::handoff

// HandoffSender: describes each tensor (with its payload MAC under a key, its
// CRC-32C without) in the StreamState header, seals the header with its MAC,
// sends it, then the tensor payloads, all under the epoch's link tag.
#include <cstring>
#include <set>

#include "seam/core/status.h"
#include "seam/handoff/crc32c.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/handoff_header.h"
#include "src/payload_mac.h"
#include "src/tensor_desc.h"

namespace seam::handoff {

HandoffSender::HandoffSender(UcxWorker& worker, UcxEndpoint& to_receiver, HandoffSenderOptions options)
    : worker_(worker), endpoint_(to_receiver), options_(std::move(options)) {}
HandoffSender::~HandoffSender() = default;
HandoffSender::HandoffSender(HandoffSender&&) noexcept = default;

absl::Status HandoffSender::Prepare() {
  if (prepared_) return absl::OkStatus();
  SEAM_ASSIGN_OR_RETURN(link_, LinkTagOf(options_.key));
  if (!options_.key.empty()) {
    SEAM_ASSIGN_OR_RETURN(PayloadMac mac, PayloadMac::Create(options_.key));
    payload_mac_ = std::make_unique<PayloadMac>(std::move(mac));
  }
  prepared_ = true;
  return absl::OkStatus();
}

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
  SEAM_RETURN_IF_ERROR(Prepare());
  v1::StreamState full = header;
  full.clear_payload_nonce();
  if (payload_mac_ != nullptr) {
    SEAM_ASSIGN_OR_RETURN(*full.mutable_payload_nonce(), PayloadMac::NewNonce());
  }
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    const std::string what = absl::StrCat(where, ": tensor '", name, "'");
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": a tensor has an empty name"));
    if (!names.insert(name).second) return absl::InvalidArgumentError(absl::StrCat(what, " appears twice"));
    SEAM_RETURN_IF_ERROR(ExpectDefined(tensor, what.c_str()));
    SEAM_RETURN_IF_ERROR(ExpectDevice(tensor, Device::CPU(), what.c_str()));
    SEAM_RETURN_IF_ERROR(ExpectContiguous(tensor, what.c_str()));
    v1::TensorDesc* desc = full.add_tensors();
    *desc = DescribeTensor(name, tensor);
    const void* data = tensor.nbytes() > 0 ? tensor.raw_data() : nullptr;
    if (payload_mac_ != nullptr) {
      const uint32_t index = static_cast<uint32_t>(full.tensors_size() - 1);
      SEAM_ASSIGN_OR_RETURN(*desc->mutable_mac(),
                            payload_mac_->Tag(full.payload_nonce(), index, data, tensor.nbytes()));
    } else {
      desc->set_crc32c(Crc32c(data, tensor.nbytes()));
    }
  }
  SEAM_ASSIGN_OR_RETURN(const std::string bytes, SealHeader(full, options_.key));
  SEAM_RETURN_IF_ERROR(Annotate(worker_.Send(endpoint_, HeaderTag(link_), bytes.data(), bytes.size(), deadline),
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
    SEAM_RETURN_IF_ERROR(Annotate(worker_.Send(endpoint_, TensorTag(link_, i), data, size, deadline),
                                  absl::StrCat(where, ": tensor '", tensors[i].first, "'")));
  }
  return absl::OkStatus();
}

}  // namespace seam::handoff

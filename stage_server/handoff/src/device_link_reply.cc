// Sealing and checking device link replies (see device_link_reply.h).
#include "src/device_link_reply.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/handoff/device_handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/header_mac.h"

namespace seam::handoff {

absl::StatusOr<std::string> ReplyKey(absl::string_view handoff_key) {
  if (handoff_key.empty()) return std::string();
  return HeaderMac(handoff_key, "seam.v1.DeviceLinkReply key");
}

absl::StatusOr<std::string> SealReply(const v1::DeviceLinkReply& reply, absl::string_view reply_key) {
  v1::DeviceLinkReply unsealed = reply;
  unsealed.clear_mac();
  std::string bytes;
  if (!unsealed.SerializeToString(&bytes)) return absl::InternalError("DeviceLinkReply does not serialize");
  return SealHeaderBytes(std::move(bytes), reply_key);
}

absl::StatusOr<v1::DeviceLinkReply> CheckReply(absl::string_view wire, absl::string_view reply_key) {
  const std::string what = absl::StrCat("device link reply of ", wire.size(), " bytes");
  if (wire.size() > kMaxReplyBytes) return absl::OutOfRangeError(absl::StrCat(what, " is too long"));
  absl::string_view body = wire;
  if (!reply_key.empty()) {
    absl::string_view mac;
    if (!SplitMacField(wire, &body, &mac)) return absl::PermissionDeniedError(absl::StrCat(what, " carries no MAC"));
    SEAM_ASSIGN_OR_RETURN(const std::string expected, HeaderMac(reply_key, body));
    if (!MacEquals(mac, expected)) return absl::PermissionDeniedError(absl::StrCat(what, ": MAC does not verify"));
  }
  v1::DeviceLinkReply reply;
  if (!reply.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, " does not parse as seam.v1.DeviceLinkReply"));
  }
  if (!reply_key.empty() && !reply.mac().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": MAC'd bytes hold a second mac field"));
  }
  if (reply.reply_case() == v1::DeviceLinkReply::REPLY_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds neither an answer nor a release"));
  }
  reply.clear_mac();
  return reply;
}

absl::Status SendDeviceLinkReply(UcxWorker& worker, UcxEndpoint& to_sender, const v1::DeviceLinkReply& reply,
                                 absl::string_view handoff_key, absl::Time deadline) {
  SEAM_ASSIGN_OR_RETURN(const std::string key, ReplyKey(handoff_key));
  SEAM_ASSIGN_OR_RETURN(const std::string bytes, SealReply(reply, key));
  SEAM_ASSIGN_OR_RETURN(const uint64_t link, LinkTagOf(handoff_key));
  return Annotate(worker.Send(to_sender, DeviceReplyTag(link), bytes.data(), bytes.size(), deadline),
                  absl::StrCat("device link reply for link ", reply.link_id()));
}

}  // namespace seam::handoff

// Tagged transfers of UcxWorker: send, receive into a caller buffer, and
// probe-based receive of unknown size, each progressing the worker in a loop
// bounded by the caller's deadline and cancelling what misses it.
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "seam/core/status.h"
#include "src/ucx_check.h"
#include "src/ucx_internal.h"

namespace seam::handoff {
namespace {

std::string TagText(uint64_t tag) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, tag);
  return text;
}

absl::Status PeerFailed(const UcxEndpointState& state, absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": peer endpoint failed: ", ucs_status_string(state.failure)));
}

}  // namespace

UcxWorker::Outcome UcxWorker::Wait(void* request, bool is_recv, absl::Time deadline, UcxEndpointState* watch) {
  Outcome out;
  auto complete = [&]() {
    ucs_status_t status;
    if (is_recv) {
      ucp_tag_recv_info_t info{};
      status = ucp_tag_recv_request_test(request, &info);
      if (status != UCS_INPROGRESS) {
        out.length = info.length;
        out.sender_tag = info.sender_tag;
      }
    } else {
      status = ucp_request_check_status(request);
    }
    if (status == UCS_INPROGRESS) return false;
    out.status = status;
    return true;
  };
  ucp_worker_h worker = handles_->worker;
  for (;;) {
    if (complete()) {
      ucp_request_free(request);
      return out;
    }
    if (watch != nullptr && watch->failed()) {
      // A message that arrived before the peer failed still completes its receive.
      ucp_worker_progress(worker);
      if (complete()) {
        ucp_request_free(request);
        return out;
      }
      out.end = Outcome::End::kPeerFailed;
      break;
    }
    if (absl::Now() >= deadline) {
      out.end = Outcome::End::kDeadline;
      break;
    }
    ucp_worker_progress(worker);
  }
  // Cancel and wait for UCX to let go of the buffer. UCX 1.13 cancels only
  // receives; a send is released at once by force-closing its endpoint,
  // which completes it with UCS_ERR_CANCELED.
  ucp_request_cancel(worker, request);
  ucp_worker_progress(worker);
  if (!is_recv && watch != nullptr && !complete()) {
    ForceCloseEndpoint(*watch, out.end == Outcome::End::kDeadline ? UCS_ERR_TIMED_OUT : watch->failure);
  }
  const absl::Time grace_end = absl::Now() + options_.cancel_grace;
  while (!complete()) {
    SEAM_CHECK_MSG(absl::Now() < grace_end, "UCX request did not complete within ",
                   absl::FormatDuration(options_.cancel_grace),
                   " of its cancellation; its buffer cannot be released safely");
    ucp_worker_progress(worker);
  }
  ucp_request_free(request);
  if (out.status == UCS_OK) out.end = Outcome::End::kDone;  // finished before the cancel took effect
  return out;
}

absl::Status UcxWorker::Send(UcxEndpoint& endpoint, uint64_t tag, const void* data, size_t size,
                             absl::Time deadline) {
  const std::string what = absl::StrCat("send of ", size, " bytes with tag ", TagText(tag));
  SEAM_RETURN_IF_ERROR(Annotate(endpoint.health(), what));
  UcxEndpointState& state = *endpoint.state_;
  ucp_request_param_t param{};
  ucs_status_ptr_t request = ucp_tag_send_nbx(state.ep, data, size, tag, &param);
  if (request == nullptr) return absl::OkStatus();
  if (UCS_PTR_IS_ERR(request)) {
    if (state.failed()) return PeerFailed(state, what);
    return UcsStatus(UCS_PTR_STATUS(request), absl::StrCat("ucp_tag_send_nbx (", what, ")"), __FILE__, __LINE__);
  }
  const Outcome out = Wait(request, /*is_recv=*/false, deadline, &state);
  switch (out.end) {
    case Outcome::End::kDone:
      if (out.status == UCS_OK) return absl::OkStatus();
      if (state.failed()) return PeerFailed(state, what);
      return UcsStatus(out.status, absl::StrCat("ucp_tag_send_nbx (", what, ")"), __FILE__, __LINE__);
    case Outcome::End::kDeadline:
      return absl::DeadlineExceededError(absl::StrCat(what, " did not complete by its deadline"));
    case Outcome::End::kPeerFailed:
      return PeerFailed(state, what);
  }
  return absl::InternalError("unreachable");
}

absl::StatusOr<size_t> UcxWorker::Recv(uint64_t tag, uint64_t tag_mask, void* data, size_t capacity,
                                       absl::Time deadline, const UcxEndpoint* watch) {
  const std::string what =
      absl::StrCat("receive of up to ", capacity, " bytes with tag ", TagText(tag), " mask ", TagText(tag_mask));
  UcxEndpointState* watched = watch != nullptr ? watch->state_.get() : nullptr;
  if (watched != nullptr && watched->failed()) return PeerFailed(*watched, what);
  // UCX 1.13 leaves recv_info unset when a receive completes immediately, so
  // always take a request and read the length from it.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  ucs_status_ptr_t request = ucp_tag_recv_nbx(handles_->worker, data, capacity, tag, tag_mask, &param);
  Outcome out;
  if (UCS_PTR_IS_ERR(request)) {
    out.status = UCS_PTR_STATUS(request);
  } else {
    out = Wait(request, /*is_recv=*/true, deadline, watched);
  }
  if (out.end == Outcome::End::kDeadline) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": no message by the deadline"));
  }
  if (out.end == Outcome::End::kPeerFailed) return PeerFailed(*watched, what);
  if (out.status == UCS_ERR_MESSAGE_TRUNCATED) {
    return absl::OutOfRangeError(absl::StrCat(what, ": message is longer than ", capacity, " bytes"));
  }
  if (out.status != UCS_OK) {
    if (watched != nullptr && watched->failed()) return PeerFailed(*watched, what);
    return UcsStatus(out.status, absl::StrCat("ucp_tag_recv_nbx (", what, ")"), __FILE__, __LINE__);
  }
  return out.length;
}

absl::StatusOr<std::vector<char>> UcxWorker::RecvUnknownSize(uint64_t tag, uint64_t tag_mask, size_t max_size,
                                                             absl::Time deadline, const UcxEndpoint* watch,
                                                             uint64_t* sender_tag) {
  const std::string what = absl::StrCat("receive with tag ", TagText(tag), " mask ", TagText(tag_mask));
  UcxEndpointState* watched = watch != nullptr ? watch->state_.get() : nullptr;
  ucp_tag_recv_info_t info{};
  ucp_tag_message_h message = nullptr;
  for (;;) {
    message = ucp_tag_probe_nb(handles_->worker, tag, tag_mask, /*remove=*/1, &info);
    if (message != nullptr) break;
    if (watched != nullptr && watched->failed()) return PeerFailed(*watched, what);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": no message by the deadline"));
    }
    ucp_worker_progress(handles_->worker);
  }
  if (sender_tag != nullptr) *sender_tag = info.sender_tag;
  // The length comes from the peer: a message over the bound is received
  // into no buffer, which UCX completes as truncated (for a rendezvous
  // message without fetching its data) and so takes it off the wire.
  const bool too_long = info.length > max_size;
  std::vector<char> bytes(too_long ? 0 : info.length);
  const Outcome out = ReceiveProbed(message, too_long ? nullptr : bytes.data(), bytes.size(),
                                    std::max(deadline, absl::Now() + options_.transfer_grace), watched);
  if (out.end == Outcome::End::kDeadline) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": ", info.length, "-byte message did not finish arriving by the deadline"));
  }
  if (out.end == Outcome::End::kPeerFailed) return PeerFailed(*watched, what);
  if (too_long && (out.status == UCS_OK || out.status == UCS_ERR_MESSAGE_TRUNCATED)) {
    return absl::OutOfRangeError(absl::StrCat(what, ": ", info.length, "-byte message is longer than ", max_size,
                                              " bytes; dropped unread"));
  }
  if (out.status != UCS_OK) {
    if (watched != nullptr && watched->failed()) return PeerFailed(*watched, what);
    return UcsStatus(out.status, absl::StrCat("ucp_tag_msg_recv_nbx (", what, ")"), __FILE__, __LINE__);
  }
  return bytes;
}

UcxWorker::Outcome UcxWorker::ReceiveProbed(void* message, void* data, size_t capacity, absl::Time deadline,
                                            UcxEndpointState* watch) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  ucs_status_ptr_t request = ucp_tag_msg_recv_nbx(handles_->worker, data, capacity,
                                                  static_cast<ucp_tag_message_h>(message), &param);
  Outcome out;
  if (UCS_PTR_IS_ERR(request)) {
    out.status = UCS_PTR_STATUS(request);
    return out;
  }
  return Wait(request, /*is_recv=*/true, deadline, watch);
}

bool UcxWorker::Arrived(uint64_t tag, uint64_t tag_mask) {
  ucp_worker_progress(handles_->worker);
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(handles_->worker, tag, tag_mask, /*remove=*/0, &info) != nullptr;
}

std::optional<UcxWorker::Unread> UcxWorker::TakeUnread(uint64_t tag, uint64_t tag_mask) {
  ucp_tag_recv_info_t info{};
  ucp_tag_message_h message = ucp_tag_probe_nb(handles_->worker, tag, tag_mask, /*remove=*/1, &info);
  if (message == nullptr) return std::nullopt;
  const Outcome out = ReceiveProbed(message, nullptr, 0, absl::Now() + options_.transfer_grace, nullptr);
  Unread taken;
  taken.tag = info.sender_tag;
  taken.length = info.length;
  // Into no buffer: a non-empty message completes as truncated, an empty one as OK.
  taken.failed = out.end != Outcome::End::kDone ||
                 (out.status != UCS_OK && out.status != UCS_ERR_MESSAGE_TRUNCATED);
  return taken;
}

}  // namespace seam::handoff

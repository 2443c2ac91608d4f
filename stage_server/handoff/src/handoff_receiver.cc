// HandoffReceiver's intake of headers: takes header messages of the link off
// the wire, bounded in size, until one is a sound header of the expected
// microbatch (dropping and counting the others, and the strays around them);
// while the stage is idle, takes what has arrived (Poll), dropping late
// handoffs and holding the others for their Receive. The payloads are
// handoff_payloads.cc's.
#include <algorithm>
#include <utility>

#include "seam/core/status.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/handoff/stray_drain.h"
#include "src/handoff_header.h"
#include "src/payload_mac.h"

namespace seam::handoff {

HandoffDrops& HandoffDrops::operator+=(const HandoffDrops& o) {
  bad_mac += o.bad_mac;
  oversized += o.oversized;
  malformed += o.malformed;
  unexpected_microbatch += o.unexpected_microbatch;
  unknown_peer += o.unknown_peer;
  unknown_kind += o.unknown_kind;
  bad_payload += o.bad_payload;
  stale_epoch += o.stale_epoch;
  incomplete += o.incomplete;
  return *this;
}

HandoffReceiver::HandoffReceiver(UcxWorker& worker, const UcxEndpoint* from_sender, HandoffReceiverOptions options)
    : worker_(worker), watch_(from_sender), options_(std::move(options)) {}
HandoffReceiver::~HandoffReceiver() = default;
HandoffReceiver::HandoffReceiver(HandoffReceiver&&) noexcept = default;

absl::Status HandoffReceiver::Prepare() {
  if (prepared_) return absl::OkStatus();
  SEAM_ASSIGN_OR_RETURN(link_, LinkTagOf(options_.key));
  if (!options_.previous_key.empty()) {
    SEAM_ASSIGN_OR_RETURN(previous_link_, LinkTagOf(options_.previous_key));
  }
  if (!options_.key.empty()) {
    SEAM_ASSIGN_OR_RETURN(PayloadMac mac, PayloadMac::Create(options_.key));
    payload_mac_ = std::make_unique<PayloadMac>(std::move(mac));
  }
  prepared_ = true;
  return absl::OkStatus();
}

void HandoffReceiver::DrainStrays() {
  if (!Prepare().ok()) return;
  last_drain_ = absl::Now();
  const HandoffDrops before = drops_;
  handoff::DrainStrays(worker_, link_, previous_link_, drops_);
  if (drops_.total() > before.total()) last_drop_ = "a message from outside the link (a stray)";
}

void HandoffReceiver::MaybeDrainStrays() {
  if (absl::Now() - last_drain_ >= options_.drain_interval) DrainStrays();
}

void HandoffReceiver::Drop(uint64_t& counter, absl::string_view why) {
  ++counter;
  last_drop_ = std::string(why);
}

std::optional<v1::StreamState> HandoffReceiver::Sound(absl::StatusOr<std::vector<char>> bytes) {
  if (absl::IsOutOfRange(bytes.status())) {
    Drop(drops_.oversized, bytes.status().message());
    return std::nullopt;
  }
  if (!bytes.ok()) {
    // The transfer of a message failed while the producer is sound: its
    // sender went away mid-message. Nothing of it is used.
    Drop(drops_.incomplete, bytes.status().message());
    return std::nullopt;
  }
  const HeaderLimits limits{options_.max_header_bytes, options_.max_payload_bytes};
  absl::StatusOr<v1::StreamState> header =
      CheckHeaderBytes(absl::string_view(bytes->data(), bytes->size()), options_.key, limits);
  if (!header.ok()) {
    // The codes of CheckHeaderBytes; an OpenSSL failure (INTERNAL) counts as malformed.
    const absl::StatusCode code = header.status().code();
    Drop(code == absl::StatusCode::kPermissionDenied ? drops_.bad_mac
         : code == absl::StatusCode::kOutOfRange     ? drops_.oversized
                                                     : drops_.malformed,
         header.status().message());
    return std::nullopt;
  }
  return *std::move(header);
}

void HandoffReceiver::Poll(uint64_t answered_through) {
  if (!Prepare().ok()) return;
  MaybeDrainStrays();
  while (held_.size() < options_.max_held_headers) {
    absl::StatusOr<std::vector<char>> bytes = worker_.RecvUnknownSize(
        HeaderTag(link_), kTagKindAndLinkMask, options_.max_header_bytes, absl::InfinitePast(), watch_);
    if (absl::IsDeadlineExceeded(bytes.status())) return;  // nothing waiting
    if (!bytes.ok() && watch_ != nullptr && !watch_->health().ok()) return;
    std::optional<v1::StreamState> header = Sound(std::move(bytes));
    if (!header.has_value()) continue;
    if (header->sequence_number() <= answered_through) {
      // For a descriptor this stage has answered (it gave up on it): late.
      Drop(drops_.unexpected_microbatch, absl::StrCat("late header of microbatch ", header->microbatch_id()));
      Discard(*header, absl::Now() + options_.drain_timeout);
      continue;
    }
    held_.push_back(*std::move(header));
  }
}

absl::StatusOr<v1::StreamState> HandoffReceiver::NextSoundHeader(const HandoffExpectation& expected,
                                                                 absl::Time deadline, uint64_t dropped_before) {
  for (;;) {
    if (!held_.empty()) {
      v1::StreamState header = std::move(held_.front());
      held_.pop_front();
      return header;
    }
    // Checked here as well: a peer that keeps sending must not hold the
    // receiver past its deadline (a probe that finds a message never times out).
    if (drops_.total() > dropped_before && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("no sound header by the deadline");
    }
    MaybeDrainStrays();
    // The wait is cut into slices: strays are drained and the interruption polled between them.
    const absl::Time until = std::min(deadline, absl::Now() + options_.drain_interval);
    absl::StatusOr<std::vector<char>> bytes = worker_.RecvUnknownSize(
        HeaderTag(link_), kTagKindAndLinkMask, options_.max_header_bytes, until, watch_);
    if (absl::IsDeadlineExceeded(bytes.status())) {
      if (until >= deadline) return bytes.status();
      if (expected.interrupted) SEAM_RETURN_IF_ERROR(expected.interrupted());
      continue;
    }
    if (!bytes.ok() && !absl::IsOutOfRange(bytes.status()) && watch_ != nullptr && !watch_->health().ok()) {
      return bytes.status();  // the producer itself is gone
    }
    if (std::optional<v1::StreamState> header = Sound(std::move(bytes)); header.has_value()) return *header;
  }
}

absl::StatusOr<ReceivedHandoff> HandoffReceiver::Receive(const HandoffExpectation& expected, absl::Time deadline) {
  SEAM_RETURN_IF_ERROR(Prepare());
  const uint64_t dropped_before = drops_.total();
  for (;;) {
    absl::StatusOr<v1::StreamState> header = NextSoundHeader(expected, deadline, dropped_before);
    if (!header.ok()) {
      // How the wait ended when no sound header came, with what it dropped.
      std::string context = absl::StrCat("handoff for microbatch ", expected.microbatch_id, ": header");
      if (drops_.total() > dropped_before) {
        absl::StrAppend(&context, " (dropped ", drops_.total() - dropped_before, " message(s) meanwhile; last: ",
                        last_drop_, ")");
      }
      return Annotate(header.status(), context);
    }
    const uint64_t microbatch = header->microbatch_id();
    if (microbatch != expected.microbatch_id) {
      // Sound (and authenticated, with a key): most likely a handoff that
      // came after its receive gave up. Its payloads go too.
      Drop(drops_.unexpected_microbatch,
           absl::StrCat("header of microbatch ", microbatch, " while expecting ", expected.microbatch_id));
      Discard(*header, std::min(deadline, absl::Now() + options_.drain_timeout));
      continue;
    }
    return ReceiveExpected(expected, *std::move(header), deadline);
  }
}

}  // namespace seam::handoff

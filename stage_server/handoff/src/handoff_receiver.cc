// HandoffReceiver: takes header messages off the wire, bounded in size, until
// one is a sound header of the expected microbatch (dropping and counting the
// others), checks it against what the stage expects, then receives each
// payload and verifies its byte count and CRC-32C before returning any tensor.
#include <algorithm>

#include "seam/core/host_staging.h"
#include "seam/core/status.h"
#include "seam/handoff/crc32c.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/handoff_header.h"
#include "src/tensor_desc.h"

namespace seam::handoff {
namespace {

absl::Status CheckId(const char* field, uint64_t expected, uint64_t got, const std::string& where) {
  if (expected == got) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(where, ": ", field, ": expected ", expected, ", got ", got));
}

bool ShapeMatches(const Shape& expected, const Shape& got) {
  if (expected.size() != got.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (expected[i] != -1 && expected[i] != got[i]) return false;
  }
  return true;
}

absl::Status CheckExpectedTensors(const v1::StreamState& header, const std::vector<ExpectedTensor>& expected,
                                  const std::string& where) {
  if (static_cast<size_t>(header.tensors_size()) != expected.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": tensors: expected ", expected.size(), ", header lists ", header.tensors_size()));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const v1::TensorDesc& desc = header.tensors(static_cast<int>(i));
    const ExpectedTensor& want = expected[i];
    if (desc.name() != want.name) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": tensor ", i, " name: expected '", want.name, "', got '", desc.name(), "'"));
    }
    const std::string what = absl::StrCat(where, ": tensor '", want.name, "'");
    const DType dtype = FromWireDType(desc.dtype()).value();  // checked by CheckDescriptors
    if (dtype != want.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " dtype: expected ", DTypeName(want.dtype), ", got ", DTypeName(dtype)));
    }
    if (!ShapeMatches(want.shape, DescShape(desc))) {
      return absl::InvalidArgumentError(absl::StrCat(what, " shape: expected ", ShapeToString(want.shape),
                                                     ", got ", ShapeToString(DescShape(desc))));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void HandoffReceiver::Drop(uint64_t& counter, absl::string_view why) {
  ++counter;
  last_drop_ = std::string(why);
}

absl::StatusOr<ReceivedHandoff> HandoffReceiver::Receive(const HandoffExpectation& expected, absl::Time deadline) {
  const HeaderLimits limits{options_.max_header_bytes, options_.max_payload_bytes};
  const uint64_t dropped_before = drops_.total();
  // How the wait ended when no sound header came, with what it dropped.
  auto wait_failed = [&](const absl::Status& status) {
    std::string context = absl::StrCat("handoff for microbatch ", expected.microbatch_id, ": header");
    if (drops_.total() > dropped_before) {
      absl::StrAppend(&context, " (dropped ", drops_.total() - dropped_before, " message(s) meanwhile; last: ",
                      last_drop_, ")");
    }
    return Annotate(status, context);
  };
  for (;;) {
    // Checked here as well: a peer that keeps sending must not hold the
    // receiver past its deadline (a probe that finds a message never times out).
    if (drops_.total() > dropped_before && absl::Now() >= deadline) {
      return wait_failed(absl::DeadlineExceededError("no sound header by the deadline"));
    }
    uint64_t tag = 0;
    // With an interruption to poll, the header wait is cut into slices.
    const absl::Time until =
        expected.interrupted ? std::min(deadline, absl::Now() + absl::Milliseconds(50)) : deadline;
    absl::StatusOr<std::vector<char>> bytes =
        worker_.RecvUnknownSize(HeaderTag(0), kTagKindMask, options_.max_header_bytes, until, watch_, &tag);
    if (absl::IsDeadlineExceeded(bytes.status()) && until < deadline) {
      if (absl::Status why = expected.interrupted(); !why.ok()) return wait_failed(why);
      continue;
    }
    if (absl::IsOutOfRange(bytes.status())) {
      Drop(drops_.oversized, bytes.status().message());
      continue;
    }
    if (!bytes.ok()) return wait_failed(bytes.status());
    absl::StatusOr<v1::StreamState> header =
        CheckHeaderBytes(absl::string_view(bytes->data(), bytes->size()), options_.key, limits);
    if (!header.ok()) {
      // The codes of CheckHeaderBytes; an OpenSSL failure (INTERNAL) counts as malformed.
      const absl::StatusCode code = header.status().code();
      Drop(code == absl::StatusCode::kPermissionDenied ? drops_.bad_mac
           : code == absl::StatusCode::kOutOfRange     ? drops_.oversized
                                                       : drops_.malformed,
           header.status().message());
      continue;
    }
    const uint64_t microbatch = header->microbatch_id();
    if (TagMicrobatch(tag) != (microbatch & kTagMicrobatchBits)) {
      Drop(drops_.malformed, absl::StrCat("header of microbatch ", microbatch, " came with the tag of microbatch ",
                                          TagMicrobatch(tag)));
      continue;
    }
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

absl::StatusOr<ReceivedHandoff> HandoffReceiver::ReceiveExpected(const HandoffExpectation& expected,
                                                                 v1::StreamState header, absl::Time deadline) {
  const uint64_t microbatch = header.microbatch_id();
  const std::string where = absl::StrCat("microbatch ", microbatch);
  const size_t count = static_cast<size_t>(header.tensors_size());
  absl::Status verdict = CheckId("epoch", expected.epoch, header.epoch(), where);
  if (verdict.ok()) verdict = CheckId("sequence_number", expected.sequence_number, header.sequence_number(), where);
  if (verdict.ok()) {
    verdict = expected.validator ? Annotate(expected.validator(header), where)
                                 : CheckExpectedTensors(header, expected.tensors, where);
  }
  if (verdict.ok()) verdict = CheckTransport(header, where);
  if (!verdict.ok()) {
    Discard(header, absl::Now() + options_.drain_timeout);
    return verdict;
  }
  if (OnDevice(header)) {
    absl::StatusOr<std::vector<Tensor>> tensors = options_.device_payloads->Take(header, deadline);
    if (!tensors.ok()) return Annotate(tensors.status(), where);
    return ReceivedHandoff{std::move(header), *std::move(tensors)};
  }

  ReceivedHandoff out;
  out.header = std::move(header);
  out.tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const v1::TensorDesc& desc = out.header.tensors(static_cast<int>(i));
    const std::string what = absl::StrCat("tensor '", desc.name(), "' of ", where);
    const DType dtype = FromWireDType(desc.dtype()).value();  // checked by CheckHeaderBytes
    // byte_size is bounded by max_payload_bytes (CheckHeaderBytes).
    absl::StatusOr<Tensor> tensor = EmptyHostStaging(DescShape(desc), dtype, options_.page_locked);
    if (!tensor.ok()) {
      Drain(microbatch, i, count, absl::Now() + options_.drain_timeout);
      return Annotate(tensor.status(), what);
    }
    void* data = desc.byte_size() > 0 ? tensor->raw_data() : nullptr;
    absl::StatusOr<size_t> got =
        worker_.Recv(TensorTag(microbatch, i), kTagMatchAll, data, desc.byte_size(), deadline, watch_);
    if (!got.ok()) {
      if (got.status().code() == absl::StatusCode::kOutOfRange) {
        Drain(microbatch, i + 1, count, absl::Now() + options_.drain_timeout);
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": more bytes arrived than header byte_size ", desc.byte_size()));
      }
      return Annotate(got.status(), what);
    }
    if (*got != desc.byte_size()) {
      Drain(microbatch, i + 1, count, absl::Now() + options_.drain_timeout);
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", *got, " bytes arrived, header byte_size ", desc.byte_size()));
    }
    const uint32_t crc = Crc32c(data, desc.byte_size());
    if (crc != desc.crc32c()) {
      Drain(microbatch, i + 1, count, absl::Now() + options_.drain_timeout);
      return absl::DataLossError(
          absl::StrCat(what, ": crc32c ", Crc32cText(crc), " != header ", Crc32cText(desc.crc32c())));
    }
    out.tensors.push_back(*std::move(tensor));
  }
  return out;
}

bool HandoffReceiver::OnDevice(const v1::StreamState& header) {
  return header.transport() == v1::HANDOFF_TRANSPORT_CUDA_IPC;
}

absl::Status HandoffReceiver::CheckTransport(const v1::StreamState& header, const std::string& where) const {
  switch (header.transport()) {
    case v1::HANDOFF_TRANSPORT_UNSPECIFIED:
    case v1::HANDOFF_TRANSPORT_HOST_UCX:
      return absl::OkStatus();
    case v1::HANDOFF_TRANSPORT_CUDA_IPC:
      if (options_.device_payloads != nullptr) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": transport HANDOFF_TRANSPORT_CUDA_IPC, and this receiver took no device link"));
    default:
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown transport ", header.transport()));
  }
}

void HandoffReceiver::Discard(const v1::StreamState& header, absl::Time deadline) {
  if (OnDevice(header)) {
    if (options_.device_payloads != nullptr) options_.device_payloads->Discard(header, deadline);
    return;
  }
  if (header.transport() > v1::HANDOFF_TRANSPORT_HOST_UCX) return;  // nothing of it travels over UCX
  Drain(header.microbatch_id(), 0, static_cast<size_t>(header.tensors_size()), deadline);
}

void HandoffReceiver::Drain(uint64_t microbatch_id, size_t first, size_t count, absl::Time deadline) {
  for (size_t i = first; i < count; ++i) {
    // Into no buffer: every non-empty payload comes back OUT_OF_RANGE, taken off the wire.
    const absl::Status got =
        worker_.RecvUnknownSize(TensorTag(microbatch_id, i), kTagMatchAll, 0, deadline, watch_).status();
    if (!got.ok() && !absl::IsOutOfRange(got)) return;
  }
}

}  // namespace seam::handoff

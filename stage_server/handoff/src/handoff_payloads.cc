// HandoffReceiver, once the expected header is in: its checks against what
// the stage expects, then each payload received and verified (its MAC with a
// key, its CRC-32C without), dropping payloads that do not verify; and the
// discarding of a rejected or late handoff's payloads.
#include <algorithm>

#include "seam/core/host_staging.h"
#include "seam/core/status.h"
#include "seam/handoff/crc32c.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/handoff_header.h"
#include "src/payload_mac.h"
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

// A keyed header whose payloads travel over UCX carries their MACs.
absl::Status CheckPayloadMacs(const v1::StreamState& header, const std::string& where) {
  if (header.tensors_size() == 0) return absl::OkStatus();
  if (header.payload_nonce().size() != kPayloadNonceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": payload_nonce of ", header.payload_nonce().size(),
                                                   " bytes, expected ", kPayloadNonceBytes));
  }
  for (const v1::TensorDesc& desc : header.tensors()) {
    if (desc.mac().size() != kPayloadMacBytes) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": tensor '", desc.name(), "' carries a MAC of ",
                                                     desc.mac().size(), " bytes, expected ", kPayloadMacBytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HandoffReceiver::AwaitPayload(uint64_t tag, absl::Time deadline,
                                           const std::function<absl::Status()>& interrupted) {
  if (!interrupted) return absl::OkStatus();
  absl::Time poll = absl::Now() + options_.drain_interval;
  while (!worker_.Arrived(tag, kTagMatchAll)) {
    const absl::Time now = absl::Now();
    if (now >= deadline || (watch_ != nullptr && !watch_->health().ok())) return absl::OkStatus();
    if (now < poll) continue;
    SEAM_RETURN_IF_ERROR(interrupted());
    MaybeDrainStrays();
    poll = now + options_.drain_interval;
  }
  return absl::OkStatus();
}

absl::Status HandoffReceiver::ReceivePayload(const v1::StreamState& header, int index, void* data,
                                             absl::Time deadline, const std::function<absl::Status()>& interrupted) {
  const v1::TensorDesc& desc = header.tensors(index);
  const std::string what = absl::StrCat("tensor '", desc.name(), "' of microbatch ", header.microbatch_id());
  const uint64_t tag = TensorTag(link_, static_cast<uint64_t>(index));
  const uint64_t dropped_before = drops_.total();
  for (;;) {
    MaybeDrainStrays();
    // The payload usually follows its header at once; a sender that died or
    // stopped between them must not hold a reload up to the deadline. Once
    // it has begun to arrive, one receive up to the deadline takes it whole:
    // a receive cut short could be cancelled mid-transfer.
    if (absl::Status cut = AwaitPayload(tag, deadline, interrupted); !cut.ok()) return Annotate(cut, what);
    absl::StatusOr<size_t> got = worker_.Recv(tag, kTagMatchAll, data, desc.byte_size(), deadline, watch_);
    absl::Status verdict;
    if (got.ok() && *got != desc.byte_size()) {
      verdict = absl::InvalidArgumentError(
          absl::StrCat(what, ": ", *got, " bytes arrived, header byte_size ", desc.byte_size()));
    } else if (absl::IsOutOfRange(got.status())) {
      verdict = absl::InvalidArgumentError(
          absl::StrCat(what, ": more bytes arrived than header byte_size ", desc.byte_size()));
    } else if (!got.ok()) {
      if (absl::IsDeadlineExceeded(got.status()) || (watch_ != nullptr && !watch_->health().ok())) {
        std::string context = what;
        if (drops_.total() > dropped_before) {
          absl::StrAppend(&context, " (dropped ", drops_.total() - dropped_before, " message(s) meanwhile; last: ",
                          last_drop_, ")");
        }
        return Annotate(got.status(), context);
      }
      Drop(drops_.incomplete, got.status().message());
      continue;
    }
    if (payload_mac_ == nullptr) {
      // The keyless protocol: a payload unlike its descriptor fails the handoff.
      SEAM_RETURN_IF_ERROR(verdict);
      const uint32_t crc = Crc32c(data, desc.byte_size());
      if (crc != desc.crc32c()) {
        return absl::DataLossError(
            absl::StrCat(what, ": crc32c ", Crc32cText(crc), " != header ", Crc32cText(desc.crc32c())));
      }
      return absl::OkStatus();
    }
    if (verdict.ok()) {
      verdict = payload_mac_->Verify(header.payload_nonce(), static_cast<uint32_t>(index), data, desc.byte_size(),
                                     desc.mac());
      if (absl::IsInternal(verdict)) return verdict;
      if (!verdict.ok()) verdict = Annotate(verdict, what);
    }
    if (verdict.ok()) return absl::OkStatus();
    // Not the payload its header announced (forged, or a late handoff's):
    // dropped; the real one comes under the same tag.
    Drop(drops_.bad_payload, verdict.message());
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
  if (verdict.ok() && !OnDevice(header) && payload_mac_ != nullptr) verdict = CheckPayloadMacs(header, where);
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
      Drain(i, count, absl::Now() + options_.drain_timeout);
      return Annotate(tensor.status(), what);
    }
    void* data = desc.byte_size() > 0 ? tensor->raw_data() : nullptr;
    if (absl::Status got = ReceivePayload(out.header, static_cast<int>(i), data, deadline, expected.interrupted);
        !got.ok()) {
      if (!absl::IsDeadlineExceeded(got) && !absl::IsUnavailable(got)) {
        Drain(i + 1, count, absl::Now() + options_.drain_timeout);
      }
      return got;
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
  Drain(0, static_cast<size_t>(header.tensors_size()), deadline);
}

void HandoffReceiver::Drain(size_t first, size_t count, absl::Time deadline) {
  for (size_t i = first; i < count; ++i) {
    // Into no buffer: every non-empty payload comes back OUT_OF_RANGE, taken off the wire.
    const absl::Status got =
        worker_.RecvUnknownSize(TensorTag(link_, i), kTagMatchAll, 0, deadline, watch_).status();
    if (!got.ok() && !absl::IsOutOfRange(got)) return;
  }
}

}  // namespace seam::handoff

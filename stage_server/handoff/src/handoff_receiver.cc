// HandoffReceiver: takes the next StreamState header, checks it against what
// the stage expects, then receives each payload and verifies its byte count
// and CRC-32C before returning any tensor.
#include <set>

#include "seam/core/host_staging.h"
#include "seam/core/status.h"
#include "seam/handoff/crc32c.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/tensor_desc.h"

namespace seam::handoff {
namespace {

absl::Status CheckId(const char* field, uint64_t expected, uint64_t got, const std::string& where) {
  if (expected == got) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(where, ": ", field, ": expected ", expected, ", got ", got));
}

// Descriptors on their own: count, known dtypes, sizes, distinct names.
absl::Status CheckDescriptors(const v1::StreamState& header, const std::string& where) {
  if (static_cast<size_t>(header.tensors_size()) > kMaxHandoffTensors) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": header lists ", header.tensors_size(), " tensors"));
  }
  std::set<std::string> names;
  for (const v1::TensorDesc& desc : header.tensors()) {
    const std::string what = absl::StrCat(where, ": tensor '", desc.name(), "'");
    if (!names.insert(desc.name()).second) return absl::InvalidArgumentError(absl::StrCat(what, " appears twice"));
    SEAM_RETURN_IF_ERROR(CheckDescriptor(desc, what));
  }
  return absl::OkStatus();
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

absl::StatusOr<ReceivedHandoff> HandoffReceiver::Receive(const HandoffExpectation& expected, absl::Time deadline) {
  const std::string waiting = absl::StrCat("handoff for microbatch ", expected.microbatch_id);
  uint64_t tag = 0;
  absl::StatusOr<std::vector<char>> bytes =
      worker_.RecvUnknownSize(HeaderTag(0), kTagKindMask, deadline, watch_, &tag);
  if (!bytes.ok()) return Annotate(bytes.status(), absl::StrCat(waiting, ": header"));

  ReceivedHandoff out;
  v1::StreamState& header = out.header;
  if (!header.ParseFromArray(bytes->data(), static_cast<int>(bytes->size()))) {
    return absl::InvalidArgumentError(absl::StrCat(waiting, ": header of ", bytes->size(), " bytes (tag microbatch ",
                                                   TagMicrobatch(tag), ") does not parse as seam.v1.StreamState"));
  }
  const uint64_t microbatch = header.microbatch_id();
  const std::string where = absl::StrCat("microbatch ", microbatch);
  absl::Status verdict = CheckId("microbatch_id", expected.microbatch_id, microbatch, where);
  if (verdict.ok() && TagMicrobatch(tag) != (microbatch & kTagMicrobatchBits)) {
    verdict = absl::InvalidArgumentError(
        absl::StrCat(where, ": microbatch_id does not match the tag's microbatch ", TagMicrobatch(tag)));
  }
  if (verdict.ok()) verdict = CheckId("epoch", expected.epoch, header.epoch(), where);
  if (verdict.ok()) verdict = CheckId("sequence_number", expected.sequence_number, header.sequence_number(), where);
  const absl::Status descriptors = CheckDescriptors(header, where);
  if (verdict.ok()) verdict = descriptors;
  if (verdict.ok()) {
    verdict = expected.validator ? Annotate(expected.validator(header), where)
                                 : CheckExpectedTensors(header, expected.tensors, where);
  }
  const size_t count = static_cast<size_t>(header.tensors_size());
  if (!verdict.ok()) {
    if (descriptors.ok()) Drain(microbatch, 0, count);
    return verdict;
  }

  out.tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const v1::TensorDesc& desc = header.tensors(static_cast<int>(i));
    const std::string what = absl::StrCat("tensor '", desc.name(), "' of ", where);
    const DType dtype = FromWireDType(desc.dtype()).value();  // checked by CheckDescriptors
    absl::StatusOr<Tensor> tensor = EmptyHostStaging(DescShape(desc), dtype, options_.page_locked);
    if (!tensor.ok()) {
      Drain(microbatch, i, count);
      return Annotate(tensor.status(), what);
    }
    void* data = desc.byte_size() > 0 ? tensor->raw_data() : nullptr;
    absl::StatusOr<size_t> got =
        worker_.Recv(TensorTag(microbatch, i), kTagMatchAll, data, desc.byte_size(), deadline, watch_);
    if (!got.ok()) {
      if (got.status().code() == absl::StatusCode::kOutOfRange) {
        Drain(microbatch, i + 1, count);
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": more bytes arrived than header byte_size ", desc.byte_size()));
      }
      return Annotate(got.status(), what);
    }
    if (*got != desc.byte_size()) {
      Drain(microbatch, i + 1, count);
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", *got, " bytes arrived, header byte_size ", desc.byte_size()));
    }
    const uint32_t crc = Crc32c(data, desc.byte_size());
    if (crc != desc.crc32c()) {
      Drain(microbatch, i + 1, count);
      return absl::DataLossError(
          absl::StrCat(what, ": crc32c ", Crc32cText(crc), " != header ", Crc32cText(desc.crc32c())));
    }
    out.tensors.push_back(*std::move(tensor));
  }
  return out;
}

void HandoffReceiver::Drain(uint64_t microbatch_id, size_t first, size_t count) {
  const absl::Time deadline = absl::Now() + options_.drain_timeout;
  for (size_t i = first; i < count; ++i) {
    if (!worker_.RecvUnknownSize(TensorTag(microbatch_id, i), kTagMatchAll, deadline, watch_).ok()) return;
  }
}

}  // namespace seam::handoff

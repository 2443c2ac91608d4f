// TensorDesc conversions and single-descriptor checks for the handoff protocol.
#include "src/tensor_desc.h"

#include <cstdio>
#include <limits>


namespace seam::handoff {

v1::DType ToWireDType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return v1::DTYPE_F32;
    case DType::kBF16: return v1::DTYPE_BF16;
    case DType::kF16: return v1::DTYPE_F16;
    case DType::kF8E4M3: return v1::DTYPE_F8E4M3;
    case DType::kI32: return v1::DTYPE_I32;
    case DType::kI64: return v1::DTYPE_I64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::StatusOr<DType> FromWireDType(int wire) {
  switch (wire) {
    case v1::DTYPE_F32: return DType::kF32;
    case v1::DTYPE_BF16: return DType::kBF16;
    case v1::DTYPE_F16: return DType::kF16;
    case v1::DTYPE_F8E4M3: return DType::kF8E4M3;
    case v1::DTYPE_I32: return DType::kI32;
    case v1::DTYPE_I64: return DType::kI64;
    default: return absl::InvalidArgumentError(absl::StrCat("dtype: unknown wire value ", wire));
  }
}

v1::TensorDesc DescribeTensor(const std::string& name, const Tensor& tensor) {
  v1::TensorDesc desc;
  desc.set_name(name);
  desc.set_dtype(ToWireDType(tensor.dtype()));
  for (int64_t d : tensor.shape()) desc.add_shape(d);
  desc.set_byte_size(tensor.nbytes());
  return desc;
}

Shape DescShape(const v1::TensorDesc& desc) { return Shape(desc.shape().begin(), desc.shape().end()); }

absl::Status CheckDescriptor(const v1::TensorDesc& desc, const std::string& where) {
  auto dtype = FromWireDType(desc.dtype());
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", dtype.status().message()));
  // Element count with an overflow guard: a hostile shape must not wrap.
  uint64_t elements = 1;
  for (int64_t d : desc.shape()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": shape ", ShapeToString(DescShape(desc)), " has a negative dimension"));
    }
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", ShapeToString(DescShape(desc)),
                                                     " has more elements than fit in 64 bits"));
    }
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t element_size = DTypeSize(*dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / element_size ||
      elements * element_size != desc.byte_size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": byte_size ", desc.byte_size(), " does not match ",
                                                   DTypeName(*dtype), ShapeToString(DescShape(desc))));
  }
  return absl::OkStatus();
}

std::string Crc32cText(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", crc);
  return text;
}

}  // namespace seam::handoff

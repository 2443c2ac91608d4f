// Conversions between seam tensors and their wire descriptors (TensorDesc):
// dtype mapping, descriptor filling and the self-consistency checks of one
// descriptor. Internal to seam_handoff.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/v1/tensor.pb.h"

namespace seam::handoff {

v1::DType ToWireDType(DType dtype);
// INVALID_ARGUMENT for DTYPE_UNSPECIFIED or a value this build does not know.
absl::StatusOr<DType> FromWireDType(int wire);

// Name, dtype, shape and byte_size of a contiguous host tensor (the sender
// adds its MAC or CRC-32C).
v1::TensorDesc DescribeTensor(const std::string& name, const Tensor& tensor);

// Checks one received descriptor on its own: known dtype, dimensions >= 0,
// byte_size == product(shape) * element size. `where` prefixes messages.
absl::Status CheckDescriptor(const v1::TensorDesc& desc, const std::string& where);

// Shape of a descriptor as a seam Shape.
Shape DescShape(const v1::TensorDesc& desc);

// "0x1a2b3c4d"
std::string Crc32cText(uint32_t crc);

}  // namespace seam::handoff

// The body of the tensor descriptor fuzz target, shared by the libFuzzer entry
// (tensor_desc_fuzz.cc, clang) and the corpus replay test (any compiler):
// bytes parsed as a v1::TensorDesc, as a handoff header carries it, then
// checked by CheckDescriptor.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seam::handoff::fuzz {

// The code CheckDescriptor gives the descriptor in `bytes`; INVALID_ARGUMENT
// too when the bytes are not a TensorDesc at all.
absl::StatusCode DescriptorCode(absl::string_view bytes);

// OK when CheckDescriptor either refuses with INVALID_ARGUMENT or accepts a
// descriptor whose dtype is known, whose dimensions are >= 0 and whose
// byte_size equals product(shape) * element size computed without wrapping;
// INTERNAL naming the broken property otherwise.
absl::Status CheckDescriptorProperties(absl::string_view bytes);

}  // namespace seam::handoff::fuzz

// The bodies of the weights fuzz targets, shared by the libFuzzer entries
// (safetensors_fuzz.cc and model_config_fuzz.cc, clang) and the corpus replay
// test (any compiler): bytes as a user-supplied checkpoint holds them, a
// whole .safetensors file or a config.json text.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seam::weights::fuzz {

// The code ParseSafetensorsLayout gives `bytes`.
absl::StatusCode SafetensorsCode(absl::string_view bytes);

// OK when ParseSafetensorsLayout either refuses with DATA_LOSS,
// INVALID_ARGUMENT or UNIMPLEMENTED, or accepts tensors that each lie inside
// the data section and span exactly product(shape) * element size bytes,
// computed without wrapping; INTERNAL naming the broken property otherwise.
absl::Status CheckSafetensorsProperties(absl::string_view bytes);

// The code ParseModelConfig gives `text`.
absl::StatusCode ModelConfigCode(absl::string_view text);

// OK when ParseModelConfig either refuses with INVALID_ARGUMENT or
// UNIMPLEMENTED, or accepts a config whose sizes are at least 1, whose heads
// divide over the KV heads, and that ModelConfigToJson writes back to text
// parsing to the same config; INTERNAL naming the broken property otherwise.
absl::Status CheckModelConfigProperties(absl::string_view text);

}  // namespace seam::weights::fuzz

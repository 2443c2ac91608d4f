// The body of the handoff header fuzz target, shared by the libFuzzer entry
// (handoff_header_fuzz.cc, clang) and the corpus replay test (any compiler):
// raw bytes, as from the wire, through CheckHeaderBytes with and without a key.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/handoff_header.h"

namespace seam::handoff::fuzz {

// The key seeds of the corpus are sealed under.
inline constexpr absl::string_view kFuzzKey = "seam-handoff-fuzz-key";
// Smaller than a stage's payload bound so inputs can cross it.
inline constexpr HeaderLimits kFuzzLimits{64 * 1024, uint64_t{1} << 30};

// Checks `wire` without a key and under kFuzzKey. OK when each check either
// refuses with one of CheckHeaderBytes's documented codes, or accepts a
// header that stays within the limits and that, sealed again, checks back
// to the same header; INTERNAL naming the broken property otherwise.
absl::Status CheckHeaderProperties(absl::string_view wire);

}  // namespace seam::handoff::fuzz

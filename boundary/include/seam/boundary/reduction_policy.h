// ReductionPolicy: which optional FFN output transports a stage may use.
// These are permissions, not commands: an ineligible scatter falls back to
// the all-reduce path. `auto` is resolved per architecture before any model
// is constructed.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace seam::boundary {

enum class ReductionPolicy : uint8_t { kAr, kRs, kRsv, kRsRsv, kAuto };

const char* ReductionPolicyName(ReductionPolicy policy);  // "ar", "rs", "rsv", "rs+rsv", "auto"
absl::StatusOr<ReductionPolicy> ParseReductionPolicy(const std::string& text);
// Resolves kAuto for an architecture ("qwen3" → rs+rsv, "qwen3_moe" → rsv, else ar);
// other policies are returned unchanged.
ReductionPolicy ResolveReductionPolicy(ReductionPolicy policy, const std::string& architecture);

inline bool AllowsFixedRs(ReductionPolicy p) { return p == ReductionPolicy::kRs || p == ReductionPolicy::kRsRsv; }
inline bool AllowsRsv(ReductionPolicy p) { return p == ReductionPolicy::kRsv || p == ReductionPolicy::kRsRsv; }

}  // namespace seam::boundary

#include "seam/comm/allreduce_choice.h"

#include <cmath>

namespace seam::comm {
namespace {

bool Valid(const AllReduceNormTiming& t) {
  return std::isfinite(t.fused_us) && std::isfinite(t.unfused_us) && t.fused_us > 0 && t.unfused_us > 0;
}

bool Favours(const AllReduceNormTiming& t) { return Valid(t) && t.fused_us <= t.unfused_us; }

}  // namespace

bool ChooseFusedAllReduce(int64_t tokens, int64_t hidden, const AllReduceNormTable& table) {
  if (tokens <= 0 || hidden <= 0) return false;
  auto exact = table.find({tokens, hidden});
  if (exact != table.end()) return Favours(exact->second);
  // Nearest valid measurements below and above at the same hidden (the table is small: scan it).
  const AllReduceNormTiming* below = nullptr;
  const AllReduceNormTiming* above = nullptr;
  int64_t below_tokens = 0;
  int64_t above_tokens = 0;
  for (const auto& [key, timing] : table) {
    if (key.second != hidden || !Valid(timing)) continue;
    if (key.first < tokens && (below == nullptr || key.first > below_tokens)) {
      below = &timing;
      below_tokens = key.first;
    } else if (key.first > tokens && (above == nullptr || key.first < above_tokens)) {
      above = &timing;
      above_tokens = key.first;
    }
  }
  return below != nullptr && above != nullptr && Favours(*below) && Favours(*above);
}

}  // namespace seam::comm

// State transitions of one request (see request_state.h).
#include "request_state.h"

#include <algorithm>

namespace seam::coordinator {

std::optional<FinishReason> RecordSample(RequestState& state, int32_t token) {
  state.generated += 1;
  state.last_token = token;
  const auto& stops = state.request.stop_token_ids;
  if (state.generated >= state.request.min_tokens && std::find(stops.begin(), stops.end(), token) != stops.end()) {
    return FinishReason::kStopToken;
  }
  if (state.generated >= state.request.max_new_tokens) return FinishReason::kMaxTokens;
  return std::nullopt;
}

void ResetForRecompute(RequestState& state) {
  state.phase = Phase::kQueued;
  state.dp_group = -1;
  state.blocks = 0;
  state.cached_blocks.clear();  // released by the caller
  state.chain_blocks = 0;
  state.chain_parent = 0;
  state.prefill_target = state.request.prompt_tokens + state.generated;
  state.prefilled = 0;
  state.kv_tokens = 0;
}

}  // namespace seam::coordinator

// run_ahead.h: the exact match a step run ahead needs.
#include "run_ahead.h"

namespace seam::server {

bool ContinuesWave(const v1::MicrobatchDescriptor& ran, uint32_t steps, const std::vector<int32_t>& last_tokens,
                   const v1::MicrobatchDescriptor& next) {
  if (next.epoch() != ran.epoch() || next.wave_size() > 1 || next.sequences_size() != ran.sequences_size() ||
      last_tokens.size() != static_cast<size_t>(next.sequences_size())) {
    return false;
  }
  for (int i = 0; i < next.sequences_size(); ++i) {
    const v1::SequenceEntry& s = next.sequences(i);
    const v1::SequenceEntry& p = ran.sequences(i);
    if (s.sequence_id() != p.sequence_id() || s.is_prefill() || s.return_token_logprobs() ||
        s.token_ids_size() != 1 || s.token_ids(0) != last_tokens[static_cast<size_t>(i)] ||
        s.position_start() != p.position_start() + steps || s.dp_group() != p.dp_group() ||
        s.sampling().SerializeAsString() != p.sampling().SerializeAsString()) {
      return false;
    }
  }
  return true;
}

}  // namespace seam::server

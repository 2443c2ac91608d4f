// The sampling of one sequence of a call, as the last stage gets it: the
// call's SamplingParams with the sequence's own seed, its prompt length and
// the tokens masked until min_tokens; and the call's seed when the client
// gave none. Pure but for FreshSeed.
#pragma once

#include <cstdint>

#include "seam/v1/sampling.pb.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::coordinator {

// A seed for a call that brought none: 64 random bits.
uint64_t FreshSeed();

// Sequence `index` of a call sampled with `call` (whose seed is set), of a
// prompt of `prompt_tokens` tokens: seed seam::SequenceSeed(call.seed, index);
// temperature, top_k, top_p, penalties, logit_bias and log-probs as asked;
// its stop tokens masked while it has fewer than min_tokens.
v1::SequenceSampling SamplingOfSequence(const v1::SamplingParams& call, int index, int prompt_tokens);

}  // namespace seam::coordinator

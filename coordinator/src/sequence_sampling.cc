// A call's sampling as each of its sequences gets it (see sequence_sampling.h).
#include "sequence_sampling.h"

#include <random>

#include "seam/core/sampling_seed.h"

namespace seam::coordinator {

uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

v1::SequenceSampling SamplingOfSequence(const v1::SamplingParams& call, int index, int prompt_tokens) {
  v1::SequenceSampling s;
  s.set_temperature(call.temperature());
  s.set_top_k(call.top_k());
  s.set_top_p(call.top_p());
  s.set_seed(SequenceSeed(call.seed(), static_cast<uint64_t>(index)));
  s.set_prompt_tokens(static_cast<uint32_t>(prompt_tokens));
  s.set_presence_penalty(call.presence_penalty());
  s.set_frequency_penalty(call.frequency_penalty());
  s.set_repetition_penalty(call.repetition_penalty());
  *s.mutable_logit_bias() = call.logit_bias();
  if (call.min_tokens() > 0) {
    s.set_min_tokens(call.min_tokens());
    *s.mutable_min_tokens_masked() = call.stop_token_ids();
  }
  s.set_logprobs(call.logprobs() || call.top_logprobs() > 0);
  s.set_top_logprobs(call.top_logprobs());
  return s;
}

}  // namespace seam::coordinator

// Request validation: the checks of request_validation.h, one message per
// mistake so that a client can fix it without reading server logs.
#include "service/request_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace seam::coordinator {
namespace {

std::string Who(const std::string& request_id) { return absl::StrCat("request '", request_id, "'"); }

absl::Status CheckTokens(const std::string& who, const char* noun, int index, const v1::TokenSequence& seq,
                         int64_t min_tokens, int64_t extra_tokens, const RequestLimits& limits) {
  const int64_t n = seq.token_ids_size();
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(who, ": ", noun, " ", index, " is empty"));
  if (n < min_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": ", noun, " ", index, " has ", n, " token, at least ", min_tokens, " are needed"));
  }
  for (int64_t t = 0; t < n; ++t) {
    const int64_t id = seq.token_ids(static_cast<int>(t));
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": ", noun, " ", index, " token ", t, " is ", id,
                                                     ", outside the vocabulary [0, ", limits.vocab_size, ")"));
    }
  }
  if (n > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": too many tokens: ", noun, " ", index, " has ", n,
                                                   " tokens, more than the ", limits.max_prompt_tokens,
                                                   " tokens a prompt may have (max_prompt_tokens)"));
  }
  const int64_t max_model_len = ServingLimitsOf(limits).max_model_len;
  if (n + extra_tokens > max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": too many tokens: ", noun, " ", index, " has ", n,
                                                   " tokens + ", extra_tokens, " new tokens = ", n + extra_tokens,
                                                   ", more than the ", max_model_len,
                                                   " positions a sequence may hold (max_model_len)"));
  }
  return absl::OkStatus();
}

absl::Status CheckCount(const std::string& who, const char* noun, int count, const RequestLimits& limits) {
  if (count > limits.max_prompts) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, " has ", count, " ", noun, "s, more than the ", limits.max_prompts, " allowed"));
  }
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat(who, " has no ", noun, "s"));
  return absl::OkStatus();
}

absl::Status CheckRequestId(const std::string& id, const RequestLimits& limits) {
  if (static_cast<int64_t>(id.size()) > limits.max_request_id_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("request_id has ", id.size(), " bytes, more than the ",
                                                   limits.max_request_id_bytes, " allowed"));
  }
  return absl::OkStatus();
}

absl::Status CheckStops(const std::string& who, const v1::SamplingParams& sp, const RequestLimits& limits) {
  if (sp.stop_size() > limits.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.stop has ", sp.stop_size(),
                                                   " strings, more than the ", limits.max_stop_strings, " allowed"));
  }
  for (int i = 0; i < sp.stop_size(); ++i) {
    if (static_cast<int64_t>(sp.stop(i).size()) > limits.max_stop_string_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.stop[", i, "] has ", sp.stop(i).size(),
                                                     " bytes, more than the ", limits.max_stop_string_bytes,
                                                     " allowed"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLogitBias(const std::string& who, const v1::SamplingParams& sp, const RequestLimits& limits) {
  if (sp.logit_bias_size() > limits.max_logit_bias) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.logit_bias has ", sp.logit_bias_size(),
                                                   " entries, more than the ", limits.max_logit_bias, " allowed"));
  }
  std::set<int32_t> tokens;
  for (int i = 0; i < sp.logit_bias_size(); ++i) {
    const v1::LogitBias& b = sp.logit_bias(i);
    if (b.token_id() < 0 || b.token_id() >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.logit_bias[", i, "] names token ",
                                                     b.token_id(), ", outside the vocabulary [0, ",
                                                     limits.vocab_size, ")"));
    }
    if (!std::isfinite(b.bias()) || b.bias() < -100 || b.bias() > 100) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.logit_bias[", i, "] is ", b.bias(),
                                                     ", it must be within [-100, 100]"));
    }
    if (!tokens.insert(b.token_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": sampling.logit_bias names token ", b.token_id(), " twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPenalties(const std::string& who, const v1::SamplingParams& sp, const RequestLimits& limits) {
  const std::pair<const char*, float> openai[] = {{"presence_penalty", sp.presence_penalty()},
                                                  {"frequency_penalty", sp.frequency_penalty()}};
  for (const auto& [name, value] : openai) {
    if (!std::isfinite(value) || value < -2 || value > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": sampling.", name, " is ", value, ", it must be within [-2, 2]"));
    }
  }
  const float r = sp.repetition_penalty();
  if (!std::isfinite(r) || r < 0 || r > 10) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.repetition_penalty is ", r,
                                                   ", it must be within (0, 10] (0: off)"));
  }
  if (sp.top_logprobs() > limits.max_top_logprobs) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.top_logprobs is ", sp.top_logprobs(),
                                                   ", more than the ", limits.max_top_logprobs, " allowed"));
  }
  if (absl::Status s = CheckStops(who, sp, limits); !s.ok()) return s;
  return CheckLogitBias(who, sp, limits);
}

}  // namespace

absl::Status ValidateTextSampling(const v1::GenerateRequest& request, bool has_tokenizer) {
  if (request.sampling().stop_size() > 0 && !has_tokenizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        Who(request.request_id()), ": sampling.stop strings are matched in the generated text, which needs the "
                                   "model's tokenizer.json; this checkpoint has none: pass stop_token_ids"));
  }
  return absl::OkStatus();
}

ServingLimits ServingLimitsOf(const RequestLimits& limits) {
  // The stages' KV may hold less than the model's positions (max_context).
  const int64_t max_model_len =
      limits.max_context > 0 ? std::min(limits.max_positions, limits.max_context) : limits.max_positions;
  return ServingLimits{max_model_len, std::min(limits.max_prompt_tokens, max_model_len),
                       limits.default_max_new_tokens};
}

v1::ServingLimits ServingLimitsMessage(const RequestLimits& limits) {
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, UINT32_MAX)); };
  const ServingLimits sequence = ServingLimitsOf(limits);
  v1::ServingLimits m;
  m.set_max_model_len(u32(sequence.max_model_len));
  m.set_max_prompt_tokens(u32(sequence.max_prompt_tokens));
  m.set_default_max_tokens(u32(sequence.default_max_tokens));
  m.set_max_prompts(u32(limits.max_prompts));
  m.set_max_request_id_bytes(u32(limits.max_request_id_bytes));
  m.set_max_stop_token_ids(u32(limits.max_stop_tokens));
  m.set_max_stop_strings(u32(limits.max_stop_strings));
  m.set_max_stop_string_bytes(u32(limits.max_stop_string_bytes));
  m.set_max_logit_bias(u32(limits.max_logit_bias));
  m.set_max_top_logprobs(u32(limits.max_top_logprobs));
  m.set_max_cache_salt_bytes(u32(static_cast<int64_t>(kMaxCacheSaltBytes)));
  return m;
}

uint64_t DescriptorBound(const RequestLimits& limits, int max_sequences, int max_tokens) {
  // Per entry: request id, sequence id, position, flags, DP group, sampling
  // with its stop tokens, each with its tag and length; per token a varint.
  // The last stage's descriptor also carries each starting sequence's
  // sampling: its masked stop tokens and its logit biases.
  const uint64_t per_sequence = static_cast<uint64_t>(limits.max_request_id_bytes) + 192 +
                                10 * static_cast<uint64_t>(limits.max_stop_tokens) +
                                12 * static_cast<uint64_t>(limits.max_logit_bias) + 11;
  return 64 + static_cast<uint64_t>(max_sequences) * per_sequence + static_cast<uint64_t>(max_tokens) * 5;
}

int64_t ResolvedMaxNewTokens(const v1::SamplingParams& sampling, const RequestLimits& limits) {
  return sampling.max_new_tokens() == 0 ? limits.default_max_new_tokens : sampling.max_new_tokens();
}

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, const RequestLimits& limits) {
  if (absl::Status s = CheckRequestId(request.request_id(), limits); !s.ok()) return s;
  const std::string who = Who(request.request_id());
  if (request.cache_salt().size() > kMaxCacheSaltBytes) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": cache_salt has ", request.cache_salt().size(),
                                                   " bytes, more than the ", kMaxCacheSaltBytes, " allowed"));
  }
  if (absl::Status s = CheckCount(who, "prompt", request.prompts_size(), limits); !s.ok()) return s;
  const v1::SamplingParams& sp = request.sampling();
  if (!std::isfinite(sp.temperature()) || sp.temperature() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": sampling.temperature is ", sp.temperature(), ", it must be >= 0 (0 is greedy)"));
  }
  if (!std::isfinite(sp.top_p()) || sp.top_p() < 0 || sp.top_p() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": sampling.top_p is ", sp.top_p(), ", it must be in [0, 1]"));
  }
  if (sp.top_k() > limits.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.top_k is ", sp.top_k(),
                                                   ", more than the vocabulary size ", limits.vocab_size));
  }
  if (sp.stop_token_ids_size() > limits.max_stop_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.stop_token_ids has ", sp.stop_token_ids_size(),
                                                   " entries, more than the ", limits.max_stop_tokens, " allowed"));
  }
  for (int i = 0; i < sp.stop_token_ids_size(); ++i) {
    const int64_t id = sp.stop_token_ids(i);
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.stop_token_ids[", i, "] is ", id,
                                                     ", outside the vocabulary [0, ", limits.vocab_size, ")"));
    }
  }
  if (absl::Status s = CheckPenalties(who, sp, limits); !s.ok()) return s;
  const int64_t new_tokens = ResolvedMaxNewTokens(sp, limits);
  if (sp.min_tokens() > new_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": sampling.min_tokens is ", sp.min_tokens(),
                                                   ", more than the ", new_tokens, " tokens it may generate"));
  }
  for (int i = 0; i < request.prompts_size(); ++i) {
    if (absl::Status s = CheckTokens(who, "prompt", i, request.prompts(i), 1, new_tokens, limits); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateScoreRequest(const v1::ScoreRequest& request, const RequestLimits& limits) {
  if (absl::Status s = CheckRequestId(request.request_id(), limits); !s.ok()) return s;
  const std::string who = Who(request.request_id());
  if (absl::Status s = CheckCount(who, "sequence", request.sequences_size(), limits); !s.ok()) return s;
  for (int i = 0; i < request.sequences_size(); ++i) {
    // Scoring runs one prefill; the scheduler still reserves the KV of one next token.
    if (absl::Status s = CheckTokens(who, "sequence", i, request.sequences(i), 2, 1, limits); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace seam::coordinator

// Request validation: the checks of request_validation.h, one message per
// mistake so that a client can fix it without reading server logs.
#include "service/request_validation.h"

#include <cmath>
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
                                                   " tokens one microbatch holds"));
  }
  if (n + extra_tokens > limits.max_positions) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": too many tokens: ", noun, " ", index, " has ", n,
                                                   " tokens + ", extra_tokens, " new tokens = ", n + extra_tokens,
                                                   ", more than the model's ", limits.max_positions, " positions"));
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

}  // namespace

uint64_t DescriptorBound(const RequestLimits& limits, int max_sequences, int max_tokens) {
  // Per entry: request id, sequence id, position, flags, DP group, sampling
  // with its stop tokens, each with its tag and length; per token a varint.
  const uint64_t per_sequence = static_cast<uint64_t>(limits.max_request_id_bytes) + 128 +
                                5 * static_cast<uint64_t>(limits.max_stop_tokens) + 11;
  return 64 + static_cast<uint64_t>(max_sequences) * per_sequence + static_cast<uint64_t>(max_tokens) * 5;
}

int64_t ResolvedMaxNewTokens(const v1::SamplingParams& sampling, const RequestLimits& limits) {
  return sampling.max_new_tokens() == 0 ? limits.default_max_new_tokens : sampling.max_new_tokens();
}

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, const RequestLimits& limits) {
  if (absl::Status s = CheckRequestId(request.request_id(), limits); !s.ok()) return s;
  const std::string who = Who(request.request_id());
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
  const int64_t new_tokens = ResolvedMaxNewTokens(sp, limits);
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

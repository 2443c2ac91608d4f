// Properties of the request checks on arbitrary bytes; see the header.
#include "fuzz/request_fuzz_body.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace seam::coordinator::fuzz {
namespace {

// What an accepted sequence must be: `min_tokens` or more tokens, each in
// the vocabulary, within one microbatch and, with `extra` new tokens, within
// the model's positions.
absl::Status CheckAcceptedTokens(const v1::TokenSequence& seq, int64_t min_tokens, int64_t extra) {
  const int64_t n = seq.token_ids_size();
  if (n < min_tokens) return absl::InternalError(absl::StrCat("accepted a sequence of ", n, " tokens"));
  if (n > kFuzzLimits.max_prompt_tokens || n + extra > kFuzzLimits.max_positions) {
    return absl::InternalError(absl::StrCat("accepted ", n, " tokens + ", extra, " new ones"));
  }
  for (int32_t id : seq.token_ids()) {
    if (id < 0 || id >= kFuzzLimits.vocab_size) return absl::InternalError(absl::StrCat("accepted token ", id));
  }
  return absl::OkStatus();
}

absl::Status CheckAcceptedCount(const std::string& id, int count) {
  if (static_cast<int64_t>(id.size()) > kFuzzLimits.max_request_id_bytes) {
    return absl::InternalError(absl::StrCat("accepted a request_id of ", id.size(), " bytes"));
  }
  if (count < 1 || count > kFuzzLimits.max_prompts) {
    return absl::InternalError(absl::StrCat("accepted ", count, " sequences"));
  }
  return absl::OkStatus();
}

absl::Status CheckGenerate(absl::string_view bytes) {
  v1::GenerateRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return absl::OkStatus();
  const absl::Status status = ValidateGenerateRequest(request, kFuzzLimits);
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kInvalidArgument) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("generate: undocumented refusal ", status.ToString()));
  }
  if (absl::Status s = CheckAcceptedCount(request.request_id(), request.prompts_size()); !s.ok()) return s;
  const v1::SamplingParams& sp = request.sampling();
  if (!std::isfinite(sp.temperature()) || sp.temperature() < 0 || !std::isfinite(sp.top_p()) || sp.top_p() < 0 ||
      sp.top_p() > 1 || sp.top_k() > kFuzzLimits.vocab_size ||
      sp.stop_token_ids_size() > kFuzzLimits.max_stop_tokens) {
    return absl::InternalError(absl::StrCat("accepted sampling ", sp.ShortDebugString()));
  }
  for (int32_t id : sp.stop_token_ids()) {
    if (id < 0 || id >= kFuzzLimits.vocab_size) return absl::InternalError(absl::StrCat("accepted stop token ", id));
  }
  const int64_t extra = ResolvedMaxNewTokens(sp, kFuzzLimits);
  for (const v1::TokenSequence& prompt : request.prompts()) {
    if (absl::Status s = CheckAcceptedTokens(prompt, 1, extra); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckScore(absl::string_view bytes) {
  v1::ScoreRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return absl::OkStatus();
  const absl::Status status = ValidateScoreRequest(request, kFuzzLimits);
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kInvalidArgument) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("score: undocumented refusal ", status.ToString()));
  }
  if (absl::Status s = CheckAcceptedCount(request.request_id(), request.sequences_size()); !s.ok()) return s;
  for (const v1::TokenSequence& seq : request.sequences()) {
    if (absl::Status s = CheckAcceptedTokens(seq, 2, 1); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusCode GenerateCode(absl::string_view bytes) {
  v1::GenerateRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return absl::StatusCode::kInvalidArgument;
  return ValidateGenerateRequest(request, kFuzzLimits).code();
}

absl::Status CheckRequestProperties(absl::string_view bytes) {
  if (absl::Status s = CheckGenerate(bytes); !s.ok()) return s;
  return CheckScore(bytes);
}

}  // namespace seam::coordinator::fuzz

// Properties of ParseOpenAiRequest over arbitrary bodies (see the header).
#include "fuzz/openai_request_fuzz_body.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "http/openai_request.h"
#include "service/model_text.h"

namespace seam::coordinator::fuzz {
namespace {

// Qwen3's tokenizer and chat template (tests/fixtures/tokenizer/qwen3, or
// $SEAM_TOKENIZER_FIXTURES/qwen3 where a fuzz bundle carries it), loaded once.
const ModelText* Text() {
  static const std::unique_ptr<ModelText> text = [] {
    const char* moved = std::getenv("SEAM_TOKENIZER_FIXTURES");
    auto loaded = ModelText::Load(std::string(moved != nullptr ? moved : SEAM_TOKENIZER_FIXTURES) + "/qwen3");
    return loaded.ok() ? std::move(*loaded) : nullptr;
  }();
  return text.get();
}

absl::Status Broken(bool chat, const std::string& what) {
  return absl::InternalError(absl::StrCat(chat ? "chat" : "completion", " request: ", what));
}

absl::Status CheckAccepted(bool chat, const http::OpenAiRequest& r) {
  const RequestLimits& l = kOpenAiFuzzLimits;
  if (r.chat != chat) return Broken(chat, "the request's kind changed");
  if (r.n < 1 || r.n > l.max_prompts) return Broken(chat, absl::StrCat("n ", r.n, " accepted"));
  const int64_t sequences = r.generate.prompts_size();
  if (sequences < 1 || sequences > l.max_prompts) {
    return Broken(chat, absl::StrCat(sequences, " sequences accepted, at most ", l.max_prompts));
  }
  if (sequences != static_cast<int64_t>(r.prompt_tokens.size()) * r.n) {
    return Broken(chat, absl::StrCat(sequences, " sequences for ", r.prompt_tokens.size(), " prompts x n ", r.n));
  }
  const float t = r.generate.sampling().temperature();
  if (!std::isfinite(t) || t < 0 || t > 2) return Broken(chat, absl::StrCat("temperature ", t, " accepted"));
  if (r.generate.request_id() != "req-fuzz") return Broken(chat, "the request id changed");
  const absl::Status valid = ValidateGenerateRequest(r.generate, l);
  if (!valid.ok() && !absl::IsInvalidArgument(valid)) {
    return Broken(chat, absl::StrCat("validation answered ", valid.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<http::OpenAiRequest> Parse(absl::string_view bytes, bool chat) {
  return http::ParseOpenAiRequest(std::string(bytes), chat, "req-fuzz", Text(), kOpenAiFuzzLimits);
}

}  // namespace

absl::StatusCode OpenAiRequestCode(absl::string_view bytes) {
  return Parse(bytes, absl::StrContains(bytes, "\"messages\"")).status().code();
}

absl::Status CheckOpenAiRequestProperties(absl::string_view bytes) {
  if (Text() == nullptr) return absl::InternalError("the Qwen3 tokenizer fixture did not load");
  for (const bool chat : {false, true}) {
    absl::StatusOr<http::OpenAiRequest> r = Parse(bytes, chat);
    if (r.ok()) {
      if (absl::Status s = CheckAccepted(chat, *r); !s.ok()) return s;
      continue;
    }
    if (!absl::IsInvalidArgument(r.status()) && !absl::IsFailedPrecondition(r.status())) {
      return Broken(chat, absl::StrCat("refused with ", r.status().ToString()));
    }
    if (r.status().message().empty()) return Broken(chat, "refused without a message");
  }
  return absl::OkStatus();
}

}  // namespace seam::coordinator::fuzz

// Properties of Tokenizer::FromJson on arbitrary bytes; see the header.
#include "fuzz/tokenizer_fuzz_body.h"

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "seam/tokenizer/tokenizer.h"

namespace seam::tokenizer::fuzz {
namespace {

std::pair<std::string_view, std::string_view> Split(absl::string_view bytes) {
  const std::string_view all(bytes.data(), bytes.size());
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, std::string_view()};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

absl::Status CheckRoundTrip(const Tokenizer& t, std::string_view text) {
  for (bool special : {true, false}) {
    const std::vector<int32_t> ids = t.Encode(text, EncodeOptions{special});
    for (int32_t id : ids) {
      if (id < 0 || id >= t.vocab_size()) {
        return absl::InternalError(absl::StrCat("encoded id ", id, " outside the vocabulary of ", t.vocab_size()));
      }
    }
    for (bool skip : {false, true}) {
      absl::StatusOr<std::string> text_back = t.Decode(ids, skip);
      if (!text_back.ok()) return absl::InternalError(absl::StrCat("decode refused: ", text_back.status().ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusCode LoadCode(absl::string_view bytes) {
  const auto [tokenizer_json, config_json] = Split(bytes);
  return Tokenizer::FromJson(tokenizer_json, config_json).status().code();
}

absl::Status CheckTokenizerProperties(absl::string_view bytes) {
  const auto [tokenizer_json, config_json] = Split(bytes);
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromJson(tokenizer_json, config_json);
  if (!t.ok()) {
    if (t.status().code() == absl::StatusCode::kInvalidArgument) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("undocumented refusal ", t.status().ToString()));
  }
  for (std::string_view text : {std::string_view("Hello, world!  It's 2026.\n\tcafe\xcc\x81 \xe6\x97\xa5\xe6\x9c\xac"),
                                std::string_view("<|end|><|im_start|>user\n\xff\xfe bad bytes</s>"),
                                tokenizer_json.substr(0, std::min<size_t>(tokenizer_json.size(), 512))}) {
    if (absl::Status s = CheckRoundTrip(**t, text); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace seam::tokenizer::fuzz

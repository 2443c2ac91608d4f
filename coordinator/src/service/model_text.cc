// ModelText: loading the tokenizer and chat template of a checkpoint, and the
// text <-> ids conversions of the client APIs.
#include "service/model_text.h"

#include "absl/strings/str_cat.h"
#include "seam/core/logging.h"
#include "seam/tokenizer/utf8.h"

namespace seam::coordinator {

absl::StatusOr<std::unique_ptr<ModelText>> ModelText::Load(const std::string& model_dir) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::Load(model_dir);
  if (absl::IsNotFound(tok.status())) return std::unique_ptr<ModelText>();
  if (!tok.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer of ", model_dir, ": ", tok.status().message()));
  }
  std::unique_ptr<ModelText> text(new ModelText());
  text->tokenizer_ = std::move(*tok);
  const std::string& source = text->tokenizer_->config().chat_template;
  if (source.empty()) {
    text->chat_error_ = "the model's tokenizer_config.json has no chat_template";
  } else if (auto parsed = chat_template::ChatTemplate::Parse(source); parsed.ok()) {
    text->chat_ = std::move(*parsed);
  } else {
    text->chat_error_ = absl::StrCat("the model's chat template is not supported: ", parsed.status().message());
    SEAM_LOG_WARN("{}; chat requests will be refused", text->chat_error_);
  }
  return text;
}

std::vector<int32_t> ModelText::Encode(const std::string& text, bool add_special_tokens) const {
  tokenizer::EncodeOptions options;
  options.add_special_tokens = add_special_tokens;
  return tokenizer_->Encode(text, options);
}

std::string ModelText::DecodeBytes(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < tokenizer_->vocab_size()) known.push_back(id);
  }
  absl::StatusOr<std::string> bytes = tokenizer_->DecodeBytes(known, /*skip_special_tokens=*/true);
  return bytes.ok() ? *bytes : std::string();
}

std::string ModelText::Decode(const std::vector<int32_t>& ids) const {
  return tokenizer::ReplaceInvalidUtf8(DecodeBytes(ids));
}

std::vector<int32_t> ModelText::EndOfTextIds() const {
  std::vector<int32_t> ids;
  if (std::optional<int32_t> eos = tokenizer_->eos_id()) ids.push_back(*eos);
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ModelText::EncodeChat(const nlohmann::ordered_json& messages,
                                                           const nlohmann::ordered_json& extra) const {
  if (chat_ == nullptr) return absl::FailedPreconditionError(chat_error_);
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  variables["messages"] = messages;
  variables["add_generation_prompt"] = true;
  const tokenizer::TokenizerConfig& config = tokenizer_->config();
  if (config.bos_token) variables["bos_token"] = *config.bos_token;
  if (config.eos_token) variables["eos_token"] = *config.eos_token;
  if (extra.is_object()) {
    for (const auto& [key, value] : extra.items()) variables[key] = value;
  }
  absl::StatusOr<std::string> rendered = chat_->Render(variables);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the chat template refused the messages: ",
                                                   rendered.status().message()));
  }
  return Encode(*rendered, /*add_special_tokens=*/false);
}

absl::StatusOr<const v1::GenerateRequest*> WithTokenPrompts(const ModelText* text, const v1::GenerateRequest& request,
                                                            v1::GenerateRequest* scratch) {
  if (request.text_prompts_size() == 0) return &request;
  if (request.prompts_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("request '", request.request_id(),
                                                   "' gives both prompts and text_prompts; give one"));
  }
  if (text == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request '", request.request_id(),
        "' has text prompts, but the model has no tokenizer.json: send token ids, or serve a checkpoint with one"));
  }
  *scratch = request;
  scratch->clear_text_prompts();
  for (const std::string& prompt : request.text_prompts()) {
    const std::vector<int32_t> ids = text->Encode(prompt);
    scratch->add_prompts()->mutable_token_ids()->Add(ids.begin(), ids.end());
  }
  return scratch;
}

std::string TextStream::Push(const std::vector<int32_t>& ids) {
  if (text_ == nullptr) return "";
  pending_ += text_->DecodeBytes(ids);
  const size_t n = tokenizer::CompleteUtf8Prefix(pending_);
  std::string out = tokenizer::ReplaceInvalidUtf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::function<std::unique_ptr<TokenText>()> TextStreams(const ModelText* text) {
  if (text == nullptr) return nullptr;
  return [text] { return std::make_unique<TextStream>(text); };
}

std::string TextStream::Flush() {
  std::string out = tokenizer::ReplaceInvalidUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace seam::coordinator

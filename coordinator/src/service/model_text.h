// The checkpoint's text side, as the coordinator uses it: its tokenizer
// (tokenizer.json, tokenizer_config.json) turns text prompts into token ids
// and completions back into text; its chat template renders chat messages.
// Shared by the gRPC service and the HTTP front end; immutable once loaded,
// used from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "seam/chat_template/chat_template.h"
#include "seam/tokenizer/tokenizer.h"
#include "seam/v1/coordinator_service.pb.h"
#include "sequence_output.h"

namespace seam::coordinator {

class ModelText {
 public:
  // Loads <model_dir>/tokenizer.json (or .json.gz) and tokenizer_config.json.
  // nullptr (not an error) when the checkpoint has no tokenizer.json;
  // INVALID_ARGUMENT for one that cannot be read. A chat template that does
  // not parse is logged and leaves chat refused (ChatTemplateError).
  static absl::StatusOr<std::unique_ptr<ModelText>> Load(const std::string& model_dir);

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  std::vector<int32_t> Encode(const std::string& text, bool add_special_tokens = true) const;
  // `ids` as text, special tokens left out, invalid UTF-8 as U+FFFD. Ids
  // outside the tokenizer's vocabulary (a model's padding rows) are skipped.
  std::string Decode(const std::vector<int32_t>& ids) const;
  // The raw bytes of `ids` (special tokens and unknown ids left out).
  std::string DecodeBytes(const std::vector<int32_t>& ids) const;
  // The tokenizer's EOS, if it has one: where a chat's answer ends.
  std::vector<int32_t> EndOfTextIds() const;

  // Renders `messages` (role / content objects) with the chat template, the
  // generation prompt added; `extra` (an object, may be null) adds template
  // variables (enable_thinking, ...). Then tokenizes without adding BOS/EOS
  // (the template writes them). FAILED_PRECONDITION without a template;
  // INVALID_ARGUMENT when the template refuses the messages.
  absl::StatusOr<std::vector<int32_t>> EncodeChat(const nlohmann::ordered_json& messages,
                                                  const nlohmann::ordered_json& extra) const;

 private:
  ModelText() = default;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<chat_template::ChatTemplate> chat_;
  std::string chat_error_;  // why chat_ is null
};

// `request` with its text_prompts tokenized into prompts; `scratch` holds
// the copy when there are any (else `request` itself is returned).
// INVALID_ARGUMENT when both prompts and text_prompts are given;
// FAILED_PRECONDITION when text comes and `text` is null (no tokenizer).
absl::StatusOr<const v1::GenerateRequest*> WithTokenPrompts(const ModelText* text, const v1::GenerateRequest& request,
                                                            v1::GenerateRequest* scratch);

// Turns a stream of token ids into text pieces that never split a UTF-8
// character: bytes of an unfinished character wait for the next tokens.
class TextStream final : public TokenText {
 public:
  explicit TextStream(const ModelText* text) : text_(text) {}
  // The text that can be sent after these tokens ("" without a tokenizer).
  std::string Push(const std::vector<int32_t>& ids);
  std::string Push(int32_t token) override { return Push(std::vector<int32_t>{token}); }
  // What is left at the end, invalid bytes as U+FFFD.
  std::string Flush() override;

 private:
  const ModelText* text_;
  std::string pending_;
};

// Each sequence's TextStream, as DriverCall::text makes them; empty
// without a tokenizer (`text` null).
std::function<std::unique_ptr<TokenText>()> TextStreams(const ModelText* text);

}  // namespace seam::coordinator

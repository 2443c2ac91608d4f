// A checkpoint's text tokenizer: Hugging Face `tokenizer.json` (byte-level BPE as used by
// Qwen2/Qwen3) and `tokenizer_config.json`, encoding and decoding with exactly the ids of
// Hugging Face `tokenizers` (tests/fixtures/tokenizer holds the golden corpus).
//
// Written by hand because no Debian C++ package implements HF byte-level BPE. What is
// hand-written: the tokenizer.json reader, the added-token splitter, the byte-to-unicode
// table, BPE merging by rank, the WHATWG UTF-8 repair. What is borrowed: the pre-tokenizer
// regex runs on PCRE2 (UTF + UCP; `\s` is rewritten to Unicode White_Space, as Oniguruma
// reads it), NFC on utf8proc, JSON on nlohmann-json, `tokenizer.json.gz` on zlib.
//
// Supported, and everything else refused at load with INVALID_ARGUMENT naming the part:
// model BPE (no dropout, byte_fallback, subword prefix or word suffix); normalizer none,
// NFC or a Sequence of them; pre-tokenizer Split(Regex, Isolated), ByteLevel, or a
// Sequence of them; decoder ByteLevel; post-processor none or ByteLevel. Letter and number
// classes are PCRE2's tables (Unicode 14 in Debian 12): characters assigned later may
// split differently from the reference.
//
// A Tokenizer is immutable after loading and safe to use from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seam::tokenizer {

// What tokenizer_config.json says (transformers' fields). Token fields may be written
// there as strings or as AddedToken objects; both are read.
struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  bool add_bos_token = false;
  bool add_eos_token = false;
  // The Jinja chat template ("default" when the file holds a list of named ones); empty if none.
  std::string chat_template;
};

struct EncodeOptions {
  // Adds BOS / EOS when tokenizer_config.json asks for them (add_bos_token / add_eos_token).
  bool add_special_tokens = true;
};

class Tokenizer {
 public:
  // Loads `<dir>/tokenizer.json` (or `tokenizer.json.gz`) and, if present,
  // `<dir>/tokenizer_config.json`. NOT_FOUND without a tokenizer.json; INVALID_ARGUMENT for
  // malformed or unsupported contents.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& dir);
  // From the texts of both files; `config_json` may be empty.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view tokenizer_json,
                                                             std::string_view config_json);
  ~Tokenizer();

  // Token ids of `text`. Bytes that are not UTF-8 are first replaced by U+FFFD, one per
  // maximal ill-formed subsequence (WHATWG / Python 'replace' / Rust from_utf8_lossy), as
  // HF front ends do before the string reaches the tokenizer. Added and special tokens
  // (e.g. <|im_start|>) in the text become their ids.
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options = {}) const;

  // The text of `ids`: the bytes of every token, invalid UTF-8 replaced by U+FFFD.
  // INVALID_ARGUMENT for an id outside the vocabulary.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // The raw bytes of `ids` (no UTF-8 repair): for streaming, where a character may span
  // tokens. Same errors as Decode.
  absl::StatusOr<std::string> DecodeBytes(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // Vocabulary size including added tokens (one more than the largest id).
  int32_t vocab_size() const;
  // The id of a vocabulary or added token, written as in tokenizer.json's vocabulary.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  bool IsSpecial(int32_t id) const;
  const TokenizerConfig& config() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonOrThrow(std::string_view tokenizer_json,
                                                                   std::string_view config_json);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::tokenizer

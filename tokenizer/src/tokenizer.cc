#include "seam/tokenizer/tokenizer.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "added_tokens.h"
#include "bpe.h"
#include "normalizer.h"
#include "pre_tokenizer.h"
#include "seam/core/status.h"
#include "seam/tokenizer/utf8.h"

namespace seam::tokenizer {
namespace {

using nlohmann::json;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadGzipFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string out;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0) out.append(buffer, n);
  int error = Z_OK;
  const std::string message = n < 0 ? gzerror(file, &error) : "";
  gzclose(file);
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  return out;
}

absl::StatusOr<json> ParseJson(std::string_view text, const char* what) {
  json parsed = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  return parsed;
}

// A token field of tokenizer_config.json: a string, an AddedToken object, or null.
std::optional<std::string> TokenField(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

absl::StatusOr<TokenizerConfig> ParseConfig(std::string_view text) {
  TokenizerConfig config;
  if (text.empty()) return config;
  SEAM_ASSIGN_OR_RETURN(json parsed, ParseJson(text, "tokenizer_config.json"));
  if (!parsed.is_object()) return absl::InvalidArgumentError("tokenizer_config.json is not an object");
  config.bos_token = TokenField(parsed, "bos_token");
  config.eos_token = TokenField(parsed, "eos_token");
  config.pad_token = TokenField(parsed, "pad_token");
  config.unk_token = TokenField(parsed, "unk_token");
  auto flag = [&](const char* key) { return parsed.contains(key) && parsed[key].is_boolean() && parsed[key].get<bool>(); };
  config.add_bos_token = flag("add_bos_token");
  config.add_eos_token = flag("add_eos_token");
  auto tmpl = parsed.find("chat_template");
  if (tmpl != parsed.end() && tmpl->is_string()) {
    config.chat_template = tmpl->get<std::string>();
  } else if (tmpl != parsed.end() && tmpl->is_array()) {
    for (const auto& named : *tmpl) {
      if (named.value("name", std::string()) == "default") config.chat_template = named.value("template", std::string());
    }
  }
  return config;
}

}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<Bpe> bpe;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  AddedTokenSplitter raw_tokens;         // matched before normalization
  AddedTokenSplitter normalized_tokens;  // matched after it
  std::unordered_map<std::string, int32_t> added_ids;
  std::vector<std::string> id_bytes;  // raw bytes (model tokens) or content (added tokens)
  std::vector<uint8_t> kind;          // 0: no token, 1: model, 2: added, 3: added special
  TokenizerConfig config;
  std::optional<int32_t> bos_id, eos_id;

  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const {
    if (text.empty()) return;
    const std::string normalized = normalizer->Apply(text);
    for (const auto& segment : normalized_tokens.Split(normalized)) {
      if (segment.token != nullptr) {
        ids->push_back(segment.token->id);
        continue;
      }
      std::vector<std::string_view> pieces;
      pre_tokenizer->Split(segment.text, &pieces);
      for (std::string_view piece : pieces) bpe->Encode(piece, ids);
    }
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path base(dir);
  std::string tokenizer_json, config_json;
  if (fs::exists(base / "tokenizer.json")) {
    SEAM_ASSIGN_OR_RETURN(tokenizer_json, ReadFile((base / "tokenizer.json").string()));
  } else if (fs::exists(base / "tokenizer.json.gz")) {
    SEAM_ASSIGN_OR_RETURN(tokenizer_json, ReadGzipFile((base / "tokenizer.json.gz").string()));
  } else {
    return absl::NotFoundError(absl::StrCat("no tokenizer.json in ", dir));
  }
  if (fs::exists(base / "tokenizer_config.json")) {
    SEAM_ASSIGN_OR_RETURN(config_json, ReadFile((base / "tokenizer_config.json").string()));
  }
  return FromJson(tokenizer_json, config_json);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view tokenizer_json,
                                                               std::string_view config_json) {
  try {
    return FromJsonOrThrow(tokenizer_json, config_json);
  } catch (const nlohmann::json::exception& e) {  // a field of an unexpected JSON type
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json or tokenizer_config.json: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonOrThrow(std::string_view tokenizer_json,
                                                                     std::string_view config_json) {
  SEAM_ASSIGN_OR_RETURN(json root, ParseJson(tokenizer_json, "tokenizer.json"));
  if (!root.is_object() || !root.contains("model")) return absl::InvalidArgumentError("tokenizer.json has no 'model'");
  auto impl = std::make_unique<Impl>();
  SEAM_ASSIGN_OR_RETURN(impl->config, ParseConfig(config_json));
  SEAM_ASSIGN_OR_RETURN(impl->bpe, Bpe::FromJson(root["model"]));
  SEAM_ASSIGN_OR_RETURN(impl->normalizer, Normalizer::FromJson(root.value("normalizer", json())));
  SEAM_ASSIGN_OR_RETURN(impl->pre_tokenizer, PreTokenizer::FromJson(root.value("pre_tokenizer", json())));
  for (const char* part : {"decoder", "post_processor"}) {
    const json& step = root.value(part, json());
    if (!step.is_null() && step.value("type", std::string()) != "ByteLevel") {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: ", part, " '", step.value("type", std::string()), "' is not supported"));
    }
  }
  impl->id_bytes = impl->bpe->id_bytes();
  impl->kind.assign(impl->id_bytes.size(), 0);
  for (const auto& [token, id] : impl->bpe->vocab()) impl->kind[id] = 1;
  for (const auto& entry : root.value("added_tokens", json::array())) {
    AddedToken token;
    if (!entry.is_object() || !entry.contains("content") || !entry.contains("id") || !entry["content"].is_string() ||
        !entry["id"].is_number_integer() || entry["id"].get<int64_t>() < 0 ||
        entry["id"].get<int64_t>() > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad added token ", entry.dump()));
    }
    token.content = entry["content"].get<std::string>();
    token.id = entry["id"].get<int32_t>();
    token.special = entry.value("special", false);
    token.normalized = entry.value("normalized", !token.special);
    token.lstrip = entry.value("lstrip", false);
    token.rstrip = entry.value("rstrip", false);
    if (entry.value("single_word", false)) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: added token '", token.content,
                                                     "' with single_word is not supported"));
    }
    if (!IsValidUtf8(token.content)) {
      return absl::InvalidArgumentError("tokenizer.json: an added token is not valid UTF-8");
    }
    if (static_cast<size_t>(token.id) >= impl->id_bytes.size()) {
      impl->id_bytes.resize(token.id + 1);
      impl->kind.resize(token.id + 1, 0);
    }
    impl->id_bytes[token.id] = token.content;
    impl->kind[token.id] = token.special ? 3 : 2;
    impl->added_ids[token.content] = token.id;
    if (token.normalized && !impl->normalizer->identity()) {
      AddedToken normalized = token;
      normalized.content = impl->normalizer->Apply(token.content);
      impl->normalized_tokens.Add(normalized);
    } else {
      impl->raw_tokens.Add(token);
    }
  }
  auto lookup = [&](const std::optional<std::string>& token) -> std::optional<int32_t> {
    if (!token) return std::nullopt;
    auto added = impl->added_ids.find(*token);
    if (added != impl->added_ids.end()) return added->second;
    auto it = impl->bpe->vocab().find(*token);
    if (it != impl->bpe->vocab().end()) return it->second;
    return std::nullopt;
  };
  impl->bos_id = lookup(impl->config.bos_token);
  impl->eos_id = lookup(impl->config.eos_token);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  if (options.add_special_tokens && impl_->config.add_bos_token && impl_->bos_id) ids.push_back(*impl_->bos_id);
  std::string repaired;
  if (!IsValidUtf8(text)) {
    repaired = ReplaceInvalidUtf8(text);
    text = repaired;
  }
  for (const auto& segment : impl_->raw_tokens.Split(text)) {
    if (segment.token != nullptr) {
      ids.push_back(segment.token->id);
    } else {
      impl_->EncodeOrdinary(segment.text, &ids);
    }
  }
  if (options.add_special_tokens && impl_->config.add_eos_token && impl_->eos_id) ids.push_back(*impl_->eos_id);
  return ids;
}

absl::StatusOr<std::string> Tokenizer::DecodeBytes(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->kind.size() || impl_->kind[id] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not in the vocabulary (size ", vocab_size(), ")"));
    }
    if (skip_special_tokens && impl_->kind[id] == 3) continue;
    out += impl_->id_bytes[id];
  }
  return out;
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  SEAM_ASSIGN_OR_RETURN(std::string bytes, DecodeBytes(ids, skip_special_tokens));
  return IsValidUtf8(bytes) ? bytes : ReplaceInvalidUtf8(bytes);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->kind.size()); }

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto added = impl_->added_ids.find(std::string(token));
  if (added != impl_->added_ids.end()) return added->second;
  auto it = impl_->bpe->vocab().find(std::string(token));
  if (it != impl_->bpe->vocab().end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kind.size() && impl_->kind[id] == 3;
}
const TokenizerConfig& Tokenizer::config() const { return impl_->config; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }

}  // namespace seam::tokenizer

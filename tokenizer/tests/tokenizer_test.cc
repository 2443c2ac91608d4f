#include "seam/tokenizer/tokenizer.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pre_tokenizer.h"

namespace seam::tokenizer {
namespace {

using nlohmann::json;

const std::string kFixtures = SEAM_TOKENIZER_FIXTURES;

// GPT-2's byte-to-unicode character of byte `b`, UTF-8.
std::string ByteChar(int b) {
  int cp = b;
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  if (!printable) {
    cp = 256;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++cp;
    }
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// A byte-level BPE with the 256 byte tokens (id = byte) and the given merges, appended in
// rank order (ids 256, 257, ...).
json TinyTokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  json merge_list = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back(json::array({a, b}));
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
  }
  return json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"added_tokens", json::array({{{"id", 1000}, {"content", "<|end|>"}, {"special", true}},
                                            {{"id", 1001}, {"content", "<|end|>x"}, {"special", false}}})}};
}

std::unique_ptr<Tokenizer> MustLoad(const json& tokenizer_json, const std::string& config = "") {
  auto t = Tokenizer::FromJson(tokenizer_json.dump(), config);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(Tokenizer, MergesLowestRankFirstAndLeftmostAmongEqualRanks) {
  // "aaa": the (a, a) merge applies at the left pair first; "abc" with bc ranked before ab.
  auto t = MustLoad(TinyTokenizer({{"b", "c"}, {"a", "a"}, {"a", "b"}}));
  EXPECT_EQ(t->Encode("aaa"), (std::vector<int32_t>{257, 'a'}));
  EXPECT_EQ(t->Encode("abc"), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(t->Encode("ab"), (std::vector<int32_t>{258}));
}

TEST(Tokenizer, AddedTokensMatchLongestFirstBeforeTheRegex) {
  auto t = MustLoad(TinyTokenizer({}));
  EXPECT_EQ(t->Encode("a<|end|>xb<|end|>"), (std::vector<int32_t>{'a', 1001, 'b', 1000}));
  EXPECT_EQ(*t->Decode({'a', 1000, 'b'}), "a<|end|>b");
  EXPECT_EQ(*t->Decode({'a', 1000, 1001, 'b'}, /*skip_special_tokens=*/true), "a<|end|>xb");
  EXPECT_TRUE(t->IsSpecial(1000));
  EXPECT_FALSE(t->IsSpecial(1001));
}

TEST(Tokenizer, DecodeRefusesAnIdOutsideTheVocabulary) {
  auto t = MustLoad(TinyTokenizer({}));
  auto decoded = t->Decode({'a', 999});
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(decoded.status().message(), "token id 999 is not in the vocabulary (size 1002)");
  EXPECT_EQ(t->Decode({-1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Tokenizer, DecodeRepairsBytesThatSplitACharacterButDecodeBytesKeepsThem) {
  auto t = MustLoad(TinyTokenizer({}));
  const std::vector<int32_t> half_euro = {0xE2, 0x82};
  EXPECT_EQ(*t->Decode(half_euro), "\xEF\xBF\xBD");
  EXPECT_EQ(*t->DecodeBytes(half_euro), "\xE2\x82");
}

TEST(Tokenizer, UnsupportedPartsAreRefusedByName) {
  auto with = [](const char* key, json value) {
    json j = TinyTokenizer({});
    j[key] = value;
    return Tokenizer::FromJson(j.dump(), "").status();
  };
  auto normalizer = with("normalizer", {{"type", "Lowercase"}});
  EXPECT_EQ(normalizer.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(normalizer.message(), "tokenizer.json: normalizer 'Lowercase' is not supported");
  EXPECT_EQ(with("pre_tokenizer", {{"type", "Metaspace"}}).message(),
            "tokenizer.json: pre-tokenizer 'Metaspace' is not supported");
  EXPECT_EQ(with("decoder", {{"type", "WordPiece"}}).message(), "tokenizer.json: decoder 'WordPiece' is not supported");
  json fallback = TinyTokenizer({});
  fallback["model"]["byte_fallback"] = true;
  EXPECT_EQ(Tokenizer::FromJson(fallback.dump(), "").status().message(),
            "tokenizer.json: BPE model with byte_fallback is not supported");
  json unigram = TinyTokenizer({});
  unigram["model"]["type"] = "Unigram";
  EXPECT_EQ(Tokenizer::FromJson(unigram.dump(), "").status().message(),
            "tokenizer.json: model type 'Unigram' is not supported (only BPE)");
  EXPECT_EQ(Tokenizer::FromJson("{", "").status().message(), "tokenizer.json is not valid JSON");
}

TEST(Tokenizer, ConfigTokensMayBeStringsOrObjectsAndAddBosIsHonoured) {
  const std::string config = R"({"bos_token": {"content": "<|end|>", "lstrip": false}, "eos_token": "<|end|>",
      "add_bos_token": true, "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})";
  auto t = MustLoad(TinyTokenizer({}), config);
  EXPECT_EQ(t->config().bos_token, "<|end|>");
  EXPECT_EQ(t->bos_id(), 1000);
  EXPECT_EQ(t->eos_id(), 1000);
  EXPECT_EQ(t->config().chat_template, "D");
  EXPECT_EQ(t->Encode("a"), (std::vector<int32_t>{1000, 'a'}));
  EXPECT_EQ(t->Encode("a", {.add_special_tokens = false}), (std::vector<int32_t>{'a'}));
}

TEST(Tokenizer, LoadWithoutTokenizerJsonIsNotFound) {
  auto t = Tokenizer::Load(kFixtures + "/chat");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

TEST(Tokenizer, PatternWhiteSpaceIsUnicodeWhiteSpaceInsideAndOutsideClasses) {
  auto rewritten = RewritePatternForPcre2("\\s+(?!\\S)|[^\\s\\p{L}]");
  ASSERT_TRUE(rewritten.ok());
  EXPECT_NE(rewritten->find("[\\t\\n"), std::string::npos);
  EXPECT_NE(rewritten->find("(?![^\\t\\n"), std::string::npos);
  EXPECT_NE(rewritten->find("[^\\t\\n"), std::string::npos);
  EXPECT_NE(rewritten->find("\\x{85}"), std::string::npos);  // NEL: PCRE2's own \s lacks it
  EXPECT_EQ(RewritePatternForPcre2("[\\S]").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Qwen3Tokenizer, ReadsTheCheckpointFilesAndTheirSpecialTokens) {
  auto t = Tokenizer::Load(kFixtures + "/qwen3");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 151669);
  EXPECT_EQ((*t)->eos_id(), 151645);  // <|im_end|>
  EXPECT_FALSE((*t)->bos_id().has_value());
  EXPECT_FALSE((*t)->config().add_bos_token);
  EXPECT_NE((*t)->config().chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ((*t)->TokenToId("<|im_start|>"), 151644);
  EXPECT_EQ((*t)->Encode("<|im_start|>user\nhi<|im_end|>"), (std::vector<int32_t>{151644, 872, 198, 6023, 151645}));
  // NFC: a decomposed é encodes as the composed one.
  EXPECT_EQ((*t)->Encode("cafe\xCC\x81"), (*t)->Encode("caf\xC3\xA9"));
  EXPECT_EQ(*(*t)->Decode({151644, 872}, /*skip_special_tokens=*/true), "user");
}

}  // namespace
}  // namespace seam::tokenizer

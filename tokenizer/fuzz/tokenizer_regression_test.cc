// Inputs the tokenizer fuzz target found, as unit tests of the behaviour each
// fix gives (their bytes are also seeds of the corpus).
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "seam/tokenizer/tokenizer.h"

namespace seam::tokenizer {
namespace {

// 256 byte tokens, GPT-2's byte-to-unicode characters as keys, id = byte.
nlohmann::json ByteTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0, extra = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : 256 + extra++;
    std::string key;
    if (cp < 0x80) {
      key.push_back(static_cast<char>(cp));
    } else {
      key.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      key.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[key] = b;
  }
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

TEST(TokenizerLoad, VocabularyIdPastTheLimitIsRefusedBeforeTheIdTableIsSized) {
  nlohmann::json j = ByteTokenizer();
  j["model"]["vocab"]["$"] = 777777778;  // sized a 778M-entry table (out of memory under the fuzzer)
  const auto t = Tokenizer::FromJson(j.dump(), "");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "tokenizer.json: bad id for vocabulary entry '$' (ids are in [0, 2097151])");
}

TEST(TokenizerLoad, AddedTokenIdPastTheLimitIsRefused) {
  for (int64_t id : {int64_t{2097152}, int64_t{INT32_MAX}, int64_t{1} << 40}) {
    nlohmann::json j = ByteTokenizer();
    j["added_tokens"] = {{{"id", id}, {"content", "<|big|>"}, {"special", true}}};
    const auto t = Tokenizer::FromJson(j.dump(), "");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_EQ(t.status().message().substr(0, 35), "tokenizer.json: bad added token {\"c") << id;
  }
}

TEST(TokenizerLoad, LargestAllowedIdLoads) {
  nlohmann::json j = ByteTokenizer();
  j["added_tokens"] = {{{"id", 2097151}, {"content", "<|last|>"}, {"special", true}}};
  const auto t = Tokenizer::FromJson(j.dump(), "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 2097152);
}

}  // namespace
}  // namespace seam::tokenizer

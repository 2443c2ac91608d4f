// The golden corpus of tests/fixtures/tokenizer (tools/make_tokenizer_golden.mjs): every
// record encodes to exactly the reference ids (transformers.js, checked there against HF
// tokenizers), and decoding the ids gives the record back (its NFC form, with U+FFFD for
// bytes that are not UTF-8, as corpus_decoded.txt lists).
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/tokenizer/tokenizer.h"
#include "seam/tokenizer/utf8.h"

namespace seam::tokenizer {
namespace {

const std::string kFixtures = SEAM_TOKENIZER_FIXTURES;

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string Unescape(const std::string& record) {
  std::string out;
  for (size_t i = 0; i < record.size(); ++i) {
    if (record[i] == '\\' && i + 1 < record.size()) {
      const char e = record[++i];
      out.push_back(e == 'n' ? '\n' : e == 'r' ? '\r' : e);
    } else {
      out.push_back(record[i]);
    }
  }
  return out;
}

std::vector<int32_t> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

TEST(TokenizerGolden, EveryCorpusRecordEncodesToTheReferenceIdsAndDecodesBack) {
  auto tokenizer = Tokenizer::Load(kFixtures + "/qwen3");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const auto corpus = ReadLines(kFixtures + "/corpus.txt");
  const auto ids = ReadLines(kFixtures + "/corpus_ids.txt");
  ASSERT_GE(corpus.size(), 10000u);
  ASSERT_EQ(corpus.size(), ids.size());
  std::map<size_t, std::string> decoded_other;
  for (const auto& line : ReadLines(kFixtures + "/corpus_decoded.txt")) {
    const size_t tab = line.find('\t');
    decoded_other[std::stoul(line.substr(0, tab))] = Unescape(line.substr(tab + 1));
  }
  size_t encode_failures = 0, decode_failures = 0, invalid = 0, roundtrips = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const size_t number = i + 1;
    const std::string text = Unescape(corpus[i]);
    const std::vector<int32_t> expected = ParseIds(ids[i]);
    const std::vector<int32_t> got = (*tokenizer)->Encode(text);
    if (got != expected && ++encode_failures <= 10) {
      ADD_FAILURE() << "record " << number << " '" << text << "'\n  expected " << Show(expected) << "\n  got      " << Show(got);
    }
    auto decoded = (*tokenizer)->Decode(expected);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    auto other = decoded_other.find(number);
    const std::string& want = other != decoded_other.end() ? other->second : text;
    if (*decoded != want && ++decode_failures <= 10) {
      ADD_FAILURE() << "record " << number << " decodes to '" << *decoded << "', want '" << want << "'";
    }
    if (!IsValidUtf8(text)) {
      ++invalid;
    } else if (other == decoded_other.end()) {
      ++roundtrips;  // decode(encode(x)) == x exactly
    }
  }
  EXPECT_EQ(encode_failures, 0u) << "of " << corpus.size() << " records";
  EXPECT_EQ(decode_failures, 0u);
  EXPECT_GT(invalid, 100u);
  EXPECT_GT(roundtrips, 9000u);
}

}  // namespace
}  // namespace seam::tokenizer

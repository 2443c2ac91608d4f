// Byte-pair encoding over raw bytes: the vocabulary and merges of a tokenizer.json "BPE"
// model (byte-level), merged lowest rank first, leftmost first among equal ranks, as HF
// tokenizers does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seam::tokenizer {

// The largest token id tokenizer.json may give (vocabulary or added token):
// id tables are sized by the largest id before anything else is checked, so
// it is bounded first. Real vocabularies hold at most ~262k tokens.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 21) - 1;

class Bpe {
 public:
  // From tokenizer.json's "model" object. INVALID_ARGUMENT for options seam does not
  // implement (dropout, byte_fallback, subword prefixes/suffixes) or a vocabulary that
  // lacks a token for some byte.
  static absl::StatusOr<std::unique_ptr<Bpe>> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece (raw bytes).
  void Encode(std::string_view piece, std::vector<int32_t>* ids) const;

  // Raw bytes of every vocabulary id (empty strings for ids the vocabulary skips).
  const std::vector<std::string>& id_bytes() const { return id_bytes_; }
  // Vocabulary entries by their tokenizer.json spelling.
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::unordered_map<std::string, int32_t> vocab_;        // tokenizer.json spelling -> id
  std::unordered_map<std::string, int32_t> bytes_to_id_;  // raw bytes -> id
  std::vector<std::string> id_bytes_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_ids_[256];
  bool ignore_merges_ = false;
};

}  // namespace seam::tokenizer

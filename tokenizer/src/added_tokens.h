// Added tokens (tokenizer.json "added_tokens": <|im_start|>, <think>, ...): found in the
// text before normalization and pre-tokenization, leftmost and longest first (what HF
// tokenizers' Aho-Corasick matcher does), then never split further.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace seam::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = false;  // matched in normalized text rather than raw text
  bool lstrip = false;      // swallows White_Space on its left
  bool rstrip = false;      // and on its right
};

class AddedTokenSplitter {
 public:
  void Add(const AddedToken& token);
  bool empty() const { return nodes_.size() == 1; }

  struct Segment {
    std::string_view text;
    const AddedToken* token = nullptr;  // null: ordinary text
  };
  // Segments of `text` in order; ordinary segments may be empty after stripping.
  std::vector<Segment> Split(std::string_view text) const;

 private:
  struct Node {
    std::unordered_map<unsigned char, int> next;
    int token = -1;
  };
  std::vector<Node> nodes_{Node{}};
  std::vector<AddedToken> tokens_;
};

}  // namespace seam::tokenizer

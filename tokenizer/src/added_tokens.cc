#include "added_tokens.h"

#include <cstdint>

namespace seam::tokenizer {
namespace {

// Byte length of a White_Space character starting at text[i] (0 if none).
size_t WhiteSpaceAt(std::string_view text, size_t i) {
  static constexpr std::string_view kMultiByte[] = {
      "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  const unsigned char c = static_cast<unsigned char>(text[i]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
  std::string_view rest = text.substr(i);
  for (std::string_view w : kMultiByte) {
    if (rest.substr(0, w.size()) == w) return w.size();
  }
  if (rest.size() >= 3 && c == 0xE2 && static_cast<unsigned char>(rest[1]) == 0x80 &&
      static_cast<unsigned char>(rest[2]) >= 0x80 && static_cast<unsigned char>(rest[2]) <= 0x8A) {
    return 3;  // U+2000..U+200A
  }
  return 0;
}

std::string_view TrimLeft(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = WhiteSpaceAt(s, i);
    if (n == 0) break;
    i += n;
  }
  return s.substr(i);
}

std::string_view TrimRight(std::string_view s) {
  // Scan forward, remembering where the trailing run of white space begins.
  size_t i = 0, run = 0;
  bool in_run = false;
  while (i < s.size()) {
    const size_t n = WhiteSpaceAt(s, i);
    if (n > 0) {
      if (!in_run) run = i;
      in_run = true;
      i += n;
    } else {
      in_run = false;
      ++i;
    }
  }
  return in_run ? s.substr(0, run) : s;
}

}  // namespace

void AddedTokenSplitter::Add(const AddedToken& token) {
  if (token.content.empty()) return;
  int node = 0;
  for (unsigned char c : token.content) {
    auto it = nodes_[node].next.find(c);
    if (it == nodes_[node].next.end()) {
      nodes_.push_back(Node{});
      it = nodes_[node].next.emplace(c, static_cast<int>(nodes_.size()) - 1).first;
    }
    node = it->second;
  }
  if (nodes_[node].token < 0) {
    tokens_.push_back(token);
    nodes_[node].token = static_cast<int>(tokens_.size()) - 1;
  }
}

std::vector<AddedTokenSplitter::Segment> AddedTokenSplitter::Split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    int node = 0, found = -1;
    size_t found_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = nodes_[node].next.find(static_cast<unsigned char>(text[j]));
      if (it == nodes_[node].next.end()) break;
      node = it->second;
      if (nodes_[node].token >= 0) {
        found = nodes_[node].token;
        found_end = j + 1;
      }
    }
    if (found < 0) {
      ++i;
      continue;
    }
    segments.push_back({text.substr(start, i - start), nullptr});
    segments.push_back({text.substr(i, found_end - i), &tokens_[found]});
    i = start = found_end;
  }
  segments.push_back({text.substr(start), nullptr});
  for (size_t k = 0; k < segments.size(); ++k) {
    const AddedToken* t = segments[k].token;
    if (t == nullptr) continue;
    if (t->lstrip && k > 0) segments[k - 1].text = TrimRight(segments[k - 1].text);
    if (t->rstrip && k + 1 < segments.size()) segments[k + 1].text = TrimLeft(segments[k + 1].text);
  }
  return segments;
}

}  // namespace seam::tokenizer

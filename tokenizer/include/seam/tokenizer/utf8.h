// UTF-8 checks and repair shared by the tokenizer and its users (streaming detokenization).
// Repair follows the WHATWG Encoding Standard's decoder (= Unicode's "maximal subpart"
// practice, Python's errors='replace', Rust's from_utf8_lossy): each maximal ill-formed
// subsequence becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace seam::tokenizer {

bool IsValidUtf8(std::string_view bytes);

// `bytes` with every maximal ill-formed subsequence replaced by U+FFFD (EF BF BD).
std::string ReplaceInvalidUtf8(std::string_view bytes);

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence that
// could still be completed by more bytes (what a stream may emit now).
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace seam::tokenizer

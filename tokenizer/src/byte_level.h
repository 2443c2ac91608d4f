// GPT-2's byte-to-unicode table: byte-level BPE vocabularies write each byte as one
// printable character (the bytes of "Ġ" stand for a space). seam's BPE works on raw bytes,
// so the table is only needed to read the vocabulary and merges.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace seam::tokenizer {

// The raw bytes a byte-level token stands for, or nullopt if `token` holds a character
// outside the table.
std::optional<std::string> ByteLevelToBytes(std::string_view token);

}  // namespace seam::tokenizer

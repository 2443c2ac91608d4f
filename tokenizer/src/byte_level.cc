#include "byte_level.h"

#include <array>
#include <cstdint>

namespace seam::tokenizer {
namespace {

// unicode code point (< 324) -> byte, or -1: bytes that are printable and not a space map
// to themselves, the other 68 to 256, 257, ... in byte order.
const std::array<int, 324>& UnicodeToByte() {
  static const std::array<int, 324> table = [] {
    std::array<int, 324> t;
    t.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[printable ? b : next++] = b;
    }
    return t;
  }();
  return table;
}

}  // namespace

std::optional<std::string> ByteLevelToBytes(std::string_view token) {
  const auto& table = UnicodeToByte();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const uint8_t b0 = static_cast<uint8_t>(token[i]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(token[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // the table's characters are all below U+0800
    }
    if (cp >= table.size() || table[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(table[cp]));
  }
  return out;
}

}  // namespace seam::tokenizer

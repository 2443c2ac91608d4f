#include "seam/tokenizer/utf8.h"

#include <cstdint>

namespace seam::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The WHATWG UTF-8 decoder, reporting sequences instead of code points: `on_char(begin,
// end)` for each well-formed sequence, `on_error()` for each maximal ill-formed one.
// Returns the start of a trailing sequence that is incomplete (bytes.size() if none).
template <typename OnChar, typename OnError>
size_t Scan(std::string_view bytes, OnChar on_char, OnError on_error) {
  int needed = 0, seen = 0;
  uint8_t lower = 0x80, upper = 0xBF;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size();) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    if (needed == 0) {
      start = i;
      if (b <= 0x7F) {
        on_char(i, i + 1);
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        needed = 2;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        needed = 3;
      } else {
        on_error();
      }
      ++i;
      continue;
    }
    if (b < lower || b > upper) {
      needed = seen = 0;
      lower = 0x80;
      upper = 0xBF;
      on_error();
      continue;  // the byte starts over
    }
    lower = 0x80;
    upper = 0xBF;
    ++i;
    if (++seen == needed) {
      on_char(start, i);
      needed = seen = 0;
    }
  }
  return needed != 0 ? start : bytes.size();
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  bool ok = true;
  const size_t end = Scan(bytes, [](size_t, size_t) {}, [&] { ok = false; });
  return ok && end == bytes.size();
}

std::string ReplaceInvalidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const size_t end = Scan(
      bytes, [&](size_t b, size_t e) { out.append(bytes.data() + b, e - b); },
      [&] { out.append(kReplacement); });
  if (end != bytes.size()) out.append(kReplacement);
  return out;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  return Scan(bytes, [](size_t, size_t) {}, [] {});
}

}  // namespace seam::tokenizer

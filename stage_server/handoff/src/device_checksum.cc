// The CPU reference of the device checksum (seam/handoff/device_checksum.h).
#include "seam/handoff/device_checksum.h"

#include <cstring>

#include "src/device_checksum_math.h"

namespace seam::handoff {

uint64_t DeviceChecksum(uint64_t seed, const std::vector<ChecksumSpan>& spans) {
  uint64_t sum = 0;
  for (const ChecksumSpan& span : spans) {
    const unsigned char* bytes = static_cast<const unsigned char*>(span.data);
    for (uint64_t offset = 0, j = 0; offset < span.bytes; offset += 4, ++j) {
      uint32_t word = 0;
      const uint64_t n = span.bytes - offset < 4 ? span.bytes - offset : 4;
      for (uint64_t b = 0; b < n; ++b) word |= static_cast<uint32_t>(bytes[offset + b]) << (8 * b);
      sum = checksum::AddMod(sum, checksum::Term(seed, span.first_word + j, word));
    }
  }
  return sum;
}

}  // namespace seam::handoff

// CRC-32C against published test vectors, and the SSE4.2 path against the
// table path on every length and alignment a payload tail can have.
#include "seam/handoff/crc32c.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace seam::handoff {
namespace {

TEST(Crc32cTest, CheckStringMatchesStandardVector) {
  const char* text = "123456789";
  EXPECT_EQ(Crc32c(text, std::strlen(text)), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, text, std::strlen(text)), 0xE3069283u);
}

TEST(Crc32cTest, ThirtyTwoZeroBytesMatchStandardVector) {
  const std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::vector<unsigned char> ones(32, 0xff);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32cTest, EmptyInputIsZero) { EXPECT_EQ(Crc32c(nullptr, 0), 0u); }

TEST(Crc32cTest, ExtendEqualsOneShot) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32c(text.data(), cut), text.data() + cut, text.size() - cut),
              Crc32c(text.data(), text.size()))
        << "cut at " << cut;
  }
}

TEST(Crc32cTest, HardwarePathEqualsTableOnEveryLengthAndAlignment) {
  std::vector<unsigned char> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t length = 0; offset + length <= bytes.size(); length += 13) {
      ASSERT_EQ(Crc32c(bytes.data() + offset, length), Crc32cExtendPortable(0, bytes.data() + offset, length))
          << "offset " << offset << " length " << length;
    }
  }
  RecordProperty("hardware", Crc32cIsHardwareAccelerated() ? "sse4.2" : "table");
}

// Long inputs take the three-chain path (rounds of 3 x 8192 and 3 x 256
// bytes); every boundary around those rounds must give the table's result.
TEST(Crc32cTest, InterleavedChainsEqualTableAroundEveryRoundBoundary) {
  std::vector<unsigned char> bytes(3 * 8192 * 2 + 3 * 256 + 64);
  uint32_t x = 12345;
  for (unsigned char& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  const size_t lengths[] = {767, 768, 769, 775, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 768,
                            3 * 8192 + 775, 2 * 3 * 8192, 2 * 3 * 8192 + 3 * 256 + 17};
  for (size_t offset : {0, 1, 5}) {
    for (size_t length : lengths) {
      if (offset + length > bytes.size()) continue;
      ASSERT_EQ(Crc32c(bytes.data() + offset, length), Crc32cExtendPortable(0, bytes.data() + offset, length))
          << "offset " << offset << " length " << length;
      const size_t cut = length / 3;
      ASSERT_EQ(Crc32cExtend(Crc32c(bytes.data() + offset, cut), bytes.data() + offset + cut, length - cut),
                Crc32cExtendPortable(0, bytes.data() + offset, length))
          << "extended at " << cut << ", length " << length;
    }
  }
}

}  // namespace
}  // namespace seam::handoff

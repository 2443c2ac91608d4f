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

}  // namespace
}  // namespace seam::handoff

#include "seam/tokenizer/utf8.h"

#include "gtest/gtest.h"

namespace seam::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, WellFormedTextIsValidAndUnchanged) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // aé中😀
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(ReplaceInvalidUtf8(text), text);
}

TEST(Utf8, EachMaximalIllFormedSubsequenceBecomesOneReplacement) {
  EXPECT_EQ(ReplaceInvalidUtf8("a\x80" "b"), "a" + kFffd + "b");                 // lone continuation
  EXPECT_EQ(ReplaceInvalidUtf8("\xE2\x82" "x"), kFffd + "x");                  // truncated: one U+FFFD
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x98"), kFffd);                         // truncated at the end
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\x80"), kFffd + kFffd);                     // overlong: C0 never starts
  EXPECT_EQ(ReplaceInvalidUtf8("\xE0\x80\x80"), kFffd + kFffd + kFffd);         // overlong 3-byte
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);         // surrogate
  EXPECT_EQ(ReplaceInvalidUtf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(ReplaceInvalidUtf8("\xE2\x28\xA1"), kFffd + "(" + kFffd);
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(Utf8, CompletePrefixStopsBeforeAnUnfinishedCharacter) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\x80"), 3u);  // invalid, not unfinished: emit (as U+FFFD)
}

}  // namespace
}  // namespace seam::tokenizer

// Templates the chat template fuzz target found, as unit tests of the
// behaviour each fix gives (they are also seeds of the corpus). Before the
// fixes each threw out of Parse, which terminated the process loading the
// checkpoint.
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "seam/chat_template/chat_template.h"

namespace seam::chat_template {
namespace {

TEST(ChatTemplateParse, EscapeWithoutHexDigitsIsRefusedNotThrown) {
  for (const std::string source : {"{{ \"\\xzz\" }}", "{{ '\\u12' }}", "{{ '\\u00g0' }}"}) {
    const auto t = ChatTemplate::Parse(source);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << source;
    EXPECT_EQ(t.status().message(), "chat template line 1: bad escape in a string") << source;
  }
}

TEST(ChatTemplateParse, HexEscapesStillReadAsCharacters) {
  const auto t = ChatTemplate::Parse("{{ '\\x41\\u00e9\\u00E9' }}");
  ASSERT_TRUE(t.ok()) << t.status();
  const auto out = (*t)->Render(nlohmann::ordered_json::object());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "A\xc3\xa9\xc3\xa9");
}

TEST(ChatTemplateParse, IntegerLiteralPast64BitsIsRefusedNotThrown) {
  const auto t = ChatTemplate::Parse("{{ 99999999999999999999 }}");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "chat template line 1: integer literal 99999999999999999999 does not fit in 64 bits");
}

TEST(ChatTemplateParse, FloatLiteralPastDoubleRangeParses) {
  EXPECT_TRUE(ChatTemplate::Parse("{{ 1" + std::string(400, '0') + ".5 }}").ok());
}

TEST(ChatTemplateParse, NestingPastTheLimitIsRefusedBeforeTheStackOverflows) {
  // 500 brackets overflowed the stack under the fuzzer (AddressSanitizer).
  for (const std::string& source : {"{{ " + std::string(500, '[') + " }}", "{{ " + std::string(101, '(') + "1" +
                                                                              std::string(101, ')') + " }}",
                                    "{{ " + std::string(200, '-') + "1 }}"}) {
    const auto t = ChatTemplate::Parse(source);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << source;
    EXPECT_EQ(t.status().message(), "chat template line 1: expression nested deeper than 100 levels") << source;
  }
  std::string nots = "{{ ";
  for (int i = 0; i < 200; ++i) nots += "not ";
  EXPECT_EQ(ChatTemplate::Parse(nots + "true }}").status().message(),
            "chat template line 1: expression nested deeper than 100 levels");
}

TEST(ChatTemplateParse, NestingUpToTheLimitRenders) {
  const auto t = ChatTemplate::Parse("{{ " + std::string(99, '(') + "1" + std::string(99, ')') + " }}");
  ASSERT_TRUE(t.ok()) << t.status();
  const auto out = (*t)->Render(nlohmann::ordered_json::object());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "1");
}

absl::StatusOr<std::string> RenderText(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) return t.status();
  return (*t)->Render(nlohmann::ordered_json::object());
}

TEST(ChatTemplateRender, IntegerArithmeticPast64BitsIsRefusedNotWrapped) {
  // 91000 ** 5 cast an out-of-range double to int64 under the fuzzer (UBSan).
  const std::pair<std::string, std::string> cases[] = {
      {"{{ 91000 ** 5 }}", "integer overflow in 91000 ** 5"},
      {"{{ 9223372036854775807 + 1 }}", "integer overflow in 9223372036854775807 + 1"},
      {"{{ -9223372036854775807 - 2 }}", "integer overflow in -9223372036854775807 - 2"},
      {"{{ 4294967296 * 4294967296 }}", "integer overflow in 4294967296 * 4294967296"},
      {"{{ -(-9223372036854775807 - 1) }}", "integer overflow in -(-9223372036854775808)"},
      {"{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow in -9223372036854775808 // -1"}};
  for (const auto& [source, what] : cases) {
    const auto out = RenderText(source);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << source;
    EXPECT_NE(out.status().message().find(what), std::string::npos) << source << ": " << out.status();
  }
}

TEST(ChatTemplateRender, IntegerArithmeticAtTheEdgesIsExactAndFloorsLikePython) {
  const auto out = RenderText(
      "{{ 7 // -2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 62 }} {{ 9223372036854775807 * 1 }} "
      "{{ -9223372036854775807 - 1 }} {{ 5 % -1 }} {{ true + 1 }}");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "-4 2 -2 4611686018427387904 9223372036854775807 -9223372036854775808 0 2");
}

absl::StatusOr<std::string> RenderSource(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) return t.status();
  return (*t)->Render(nlohmann::ordered_json::object());
}

TEST(ChatTemplateRender, StringRepetitionIsSizedBeforeItIsBuilt) {
  // '' * 4000000000 looped four billion times under the fuzzer (a timeout).
  auto empty = RenderSource("{{ 'ab' * 0 * 4000000000 }}|{{ '' * 4000000000 }}|{{ 'ab' * -3 }}|{{ 'ab' * 3 }}");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "|||ababab");
  auto big = RenderSource("{{ 'ab' * 4000000000 }}");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(big.status().message(), "chat template line 1: a repeated string passed 16 MiB or 1000000 items");
}

TEST(ChatTemplateRender, WorkIsBoundedByTheStepBudget) {
  // Nested loops of a billion iterations stop at the budget instead of running for hours.
  auto loops = RenderSource(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}"
      "{% endfor %}{% endfor %}");
  EXPECT_EQ(loops.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loops.status().message(), "chat template: the render passed 1000000 evaluation steps");
}

TEST(ChatTemplateRender, ValuesThatDoubleAreRefusedPastTheByteLimit) {
  auto doubling = RenderSource(
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
      "{{ ns.s | length }}");
  EXPECT_EQ(doubling.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(doubling.status().message(), "chat template line 1: a value passed 16 MiB or 1000000 items");
  auto lists = RenderSource(
      "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}");
  EXPECT_EQ(lists.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateParse, ChainsWithoutBracketsAreBoundedLikeNesting) {
  // 400 comparisons in a row overflowed the render's stack under the fuzzer
  // (AddressSanitizer): each is a level of the tree the render recurses into.
  std::string chain = "{{ 1";
  for (int i = 0; i < 400; ++i) chain += " > 0";
  EXPECT_EQ(ChatTemplate::Parse(chain + " }}").status().message(),
            "chat template line 1: expression nested deeper than 100 levels");
  std::string attrs = "{{ x";
  for (int i = 0; i < 150; ++i) attrs += ".a";
  EXPECT_EQ(ChatTemplate::Parse(attrs + " }}").status().code(), absl::StatusCode::kInvalidArgument);
  std::string concat = "{{ 'a'";
  for (int i = 0; i < 60; ++i) concat += " ~ 'a'";
  auto out = RenderSource(concat + " }}");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::string(61, 'a'));
}

}  // namespace
}  // namespace seam::chat_template

#include "seam/chat_template/chat_template.h"

#include "gtest/gtest.h"

namespace seam::chat_template {
namespace {

using nlohmann::ordered_json;

absl::StatusOr<std::string> Render(const std::string& source, const ordered_json& variables = ordered_json::object()) {
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) return t.status();
  return (*t)->Render(variables);
}

std::string MustRender(const std::string& source, const ordered_json& variables = ordered_json::object()) {
  auto out = Render(source, variables);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

std::string ParseError(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(t.status().message());
}

TEST(ChatTemplate, DashesStripWhitespaceOnTheirSideOfTheTag) {
  EXPECT_EQ(MustRender("a  \n {{- 'b' -}} \n  c"), "abc");
  EXPECT_EQ(MustRender("a {{ 'b' }} c"), "a b c");
  EXPECT_EQ(MustRender("x\n  {%- if true -%}\n  y  {%- endif %}"), "xy");
}

TEST(ChatTemplate, BlockTagsTrimTheirNewlineAndLeadingBlanksAsTransformersDoes) {
  EXPECT_EQ(MustRender("{% if true %}\n  yes\n  {% endif %}\nafter"), "  yes\nafter");
  EXPECT_EQ(MustRender("line\n"), "line");  // one trailing newline is dropped
  EXPECT_EQ(MustRender("a{# comment #}\nb"), "ab");
  EXPECT_EQ(MustRender("{{ 'x' }}\ny"), "x\ny");  // not after {{ }}
}

TEST(ChatTemplate, LoopVariablesDescribeThePosition) {
  EXPECT_EQ(MustRender("{% for x in xs %}{{ loop.index0 }}{{ x }}{% if loop.first %}F{% endif %}"
                       "{% if loop.last %}L{{ loop.length }}{% endif %};{% endfor %}",
                       {{"xs", {"a", "b", "c"}}}),
            "0aF;1b;2cL3;");
  EXPECT_EQ(MustRender("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", {{"xs", ordered_json::array()}}), "empty");
  EXPECT_EQ(MustRender("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}), "b=1,a=2,");
  EXPECT_EQ(MustRender("{% for x in xs if x > 1 %}{{ loop.index }}{{ x }}{% endfor %}", {{"xs", {1, 2, 3}}}), "1223");
}

TEST(ChatTemplate, SetInsideALoopStaysThereButANamespaceCarriesOut) {
  EXPECT_EQ(MustRender("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(MustRender("{% set ns = namespace(x=1) %}{% for i in [5, 7] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"), "13");
}

TEST(ChatTemplate, FiltersBindTighterThanArithmeticAndTestsThanNot) {
  EXPECT_EQ(MustRender("{{ xs|length - 1 }}", {{"xs", {1, 2, 3}}}), "2");
  EXPECT_EQ(MustRender("{{ 'a' + x | trim + 'b' }}", {{"x", "  y  "}}), "ayb");
  EXPECT_EQ(MustRender("{{ not x is defined }}"), "True");
  EXPECT_EQ(MustRender("{{ 2 * 3 ~ '!' }}{{ (1 + 2) ~ '!' }}"), "6!3!");
  EXPECT_EQ(Render("{{ 1 + 2 ~ '!' }}").status().message(),  // ~ binds tighter than +, as in Jinja2
            "chat template line 1: unsupported operand types for +: integer and string");
}

TEST(ChatTemplate, SlicesAndIndexesFollowPython) {
  const ordered_json v = {{"xs", {1, 2, 3, 4}}, {"s", "h\xC3\xA9llo"}};
  EXPECT_EQ(MustRender("{{ xs[::-1] }}|{{ xs[1:] }}|{{ xs[-1] }}|{{ xs[1:3] }}|{{ xs[::2] }}", v), "[4, 3, 2, 1]|[2, 3, 4]|4|[2, 3]|[1, 3]");
  EXPECT_EQ(MustRender("{{ s[1] }}{{ s[-2:] }}{{ s|length }}", v), "\xC3\xA9lo5");
  EXPECT_EQ(MustRender("[{{ xs[10] }}]", v), "[]");
}

TEST(ChatTemplate, StringMethodsFollowPython) {
  EXPECT_EQ(MustRender("{{ s.split('</think>')[-1].lstrip('\\n') }}", {{"s", "<think>r</think>\n\nanswer"}}), "answer");
  // Python's strip(chars) strips only those characters (transformers.js's engine strips all white space).
  EXPECT_EQ(MustRender("{{ s.lstrip('\\n') }}", {{"s", "\n\n  x"}}), "  x");
  EXPECT_EQ(MustRender("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a b  c'.split() }}"), "a b|a|['a', 'b', 'c']");
  EXPECT_EQ(MustRender("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'a/think'.replace('/think', '') }}"),
            "TrueTruea");
  EXPECT_EQ(MustRender("{{ ', '.join(['a', 'b']) }}|{{ ['x', 'y']|join('-') }}|{{ 'ab'|upper }}"), "a, b|x-y|AB");
}

TEST(ChatTemplate, TestsMembershipAndConditions) {
  const ordered_json v = {{"m", {{"content", "hi"}, {"n", nullptr}, {"f", false}}}};
  EXPECT_EQ(MustRender("{{ m.content is defined }}{{ m.other is defined }}{{ m.n is none }}{{ m.n is not none }}", v),
            "TrueFalseTrueFalse");
  EXPECT_EQ(MustRender("{{ m.f is false }}{{ m.content is string }}{{ m is mapping }}", v), "TrueTrueTrue");
  EXPECT_EQ(MustRender("{{ 'h' in m.content }}{{ 'z' not in m.content }}{{ 'content' in m }}{{ 2 in [1, 2] }}", v),
            "TrueTrueTrueTrue");
  EXPECT_EQ(MustRender("{{ 'yes' if m.content else 'no' }}{{ m.f or 'dflt' }}{{ m.content and 'both' }}", v), "yesdfltboth");
  EXPECT_EQ(MustRender("{% if m.f %}a{% elif m.content == 'hi' %}b{% else %}c{% endif %}", v), "b");
}

TEST(ChatTemplate, TojsonKeepsKeyOrderWithPythonSeparators) {
  const ordered_json v = {{"x", {{"z", 1}, {"a", {true, nullptr, 2.5, "q\"\n\xC3\xA9"}}}}};
  EXPECT_EQ(MustRender("{{ x|tojson }}", v), "{\"z\": 1, \"a\": [true, null, 2.5, \"q\\\"\\n\xC3\xA9\"]}");
  EXPECT_EQ(MustRender("{{ x|tojson(indent=2) }}", {{"x", {{"k", {1}}}}}), "{\n  \"k\": [\n    1\n  ]\n}");
}

TEST(ChatTemplate, ValuesPrintAsPythonDoes) {
  EXPECT_EQ(MustRender("{{ true }} {{ none }} {{ 1.0 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ missing }}."),
            "True None 1.0 3 3.5 2 .");
}

TEST(ChatTemplate, RaiseExceptionFailsTheRenderWithTheTemplatesMessage) {
  auto out = Render("a{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Conversation roles must alternate");
}

TEST(ChatTemplate, OperationsOnUndefinedValuesAreErrors) {
  auto out = Render("{{ missing.content }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "chat template line 1: 'missing' is undefined (attribute content)");
  EXPECT_EQ(Render("{{ 'a' + missing }}").status().message(),
            "chat template line 1: 'missing' is undefined (operand of +)");
}

TEST(ChatTemplate, ConstructsOutsideTheSubsetAreRefusedByName) {
  EXPECT_EQ(ParseError("{% macro f() %}x{% endmacro %}"), "chat template line 1: unsupported construct 'macro'");
  EXPECT_EQ(ParseError("a\n{% include 'x.jinja' %}"), "chat template line 2: unsupported construct 'include'");
  EXPECT_EQ(ParseError("{{ x | wordwrap }}"), "chat template line 1: unsupported construct 'filter wordwrap'");
  EXPECT_EQ(ParseError("{{ x is divisibleby(3) }}"), "chat template line 1: unsupported construct 'test divisibleby'");
  EXPECT_EQ(ParseError("{{ x.format(1) }}"), "chat template line 1: unsupported construct 'method format'");
  EXPECT_EQ(ParseError("{{ strftime_now('%Y') }}"), "chat template line 1: unsupported construct 'function strftime_now'");
  EXPECT_EQ(ParseError("{% set x %}y{% endset %}"), "chat template line 1: unsupported construct 'set block'");
  EXPECT_EQ(ParseError("{{ (1, 2) }}"), "chat template line 1: unsupported construct 'tuple'");
  EXPECT_EQ(ParseError("{% for x in xs %}{% break %}{% endfor %}"), "chat template line 1: unsupported construct 'break'");
  EXPECT_EQ(ParseError("{% if x %}"), "chat template line 1: 'if' is never closed");
  EXPECT_EQ(ParseError("{% endif %}"), "chat template line 1: unexpected 'endif'");
}

}  // namespace
}  // namespace seam::chat_template

// Renderings of tests/fixtures/tokenizer/chat/cases.json (made by transformers.js
// apply_chat_template, tools/make_tokenizer_golden.mjs): Qwen3's template and a
// Nemotron-style one, byte for byte, including the raise_exception cases.
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "seam/chat_template/chat_template.h"

namespace seam::chat_template {
namespace {

using nlohmann::ordered_json;

const std::string kFixtures = SEAM_TOKENIZER_FIXTURES;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ChatTemplateGolden, EveryConversationRendersExactlyAsTheReference) {
  const ordered_json config = ordered_json::parse(ReadFile(kFixtures + "/qwen3/tokenizer_config.json"));
  auto qwen3 = ChatTemplate::Parse(config["chat_template"].get<std::string>());
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  auto nemotron = ChatTemplate::Parse(ReadFile(kFixtures + "/chat/nemotron_style.jinja"));
  ASSERT_TRUE(nemotron.ok()) << nemotron.status();
  const ordered_json cases = ordered_json::parse(ReadFile(kFixtures + "/chat/cases.json"));
  ASSERT_GE(cases.size(), 100u);
  int rendered = 0, raised = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>() + (c["add_generation_prompt"].get<bool>() ? " +gen" : "") +
                             (c.contains("enable_thinking") ? " thinking=" + c["enable_thinking"].dump() : "");
    ordered_json variables = {{"messages", c["messages"]},
                              {"add_generation_prompt", c["add_generation_prompt"]},
                              {"tools", c.contains("tools") ? c["tools"] : ordered_json()},
                              {"documents", nullptr},
                              {"eos_token", config["eos_token"]},
                              {"pad_token", config["pad_token"]}};
    if (c.contains("enable_thinking")) variables["enable_thinking"] = c["enable_thinking"];
    const ChatTemplate& t = c["template"] == "qwen3" ? **qwen3 : **nemotron;
    auto out = t.Render(variables);
    if (c.contains("error")) {
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << name;
      EXPECT_EQ(out.status().message(), c["error"].get<std::string>()) << name;
      ++raised;
    } else {
      ASSERT_TRUE(out.ok()) << name << ": " << out.status();
      EXPECT_EQ(*out, c["expected"].get<std::string>()) << name;
      ++rendered;
    }
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(raised, 0);
}

}  // namespace
}  // namespace seam::chat_template

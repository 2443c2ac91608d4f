// The bounded parse of request bodies: documents within the bounds read as
// nlohmann's own parse reads them; depth and value count refused by name at
// the bound, before a deep or wide body is built.
#include "http/request_json.h"

#include <string>

#include <gtest/gtest.h>

namespace seam::coordinator::http {
namespace {

TEST(RequestJson, ADocumentWithinTheBoundsReadsAsNlohmannReadsIt) {
  const std::string text =
      R"({"model": "m", "prompt": [[1, 2], [3]], "n": 2, "t": 0.5, "s": "é\n", "b": true, "z": null, "o": {"k": [{}]}})";
  absl::StatusOr<nlohmann::ordered_json> got = ParseBoundedJson(text, JsonBounds{});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, nlohmann::ordered_json::parse(text));
  EXPECT_EQ(got->dump(), nlohmann::ordered_json::parse(text).dump());  // key order kept
}

TEST(RequestJson, NestingPastTheBoundIsRefusedByName) {
  const std::string deep = std::string(8 << 20, '[');  // 8 MiB of '[' within a body limit
  absl::StatusOr<nlohmann::ordered_json> got = ParseBoundedJson(deep, JsonBounds{});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "the request body nests deeper than 32 levels");
  EXPECT_TRUE(ParseBoundedJson(std::string(32, '[') + std::string(32, ']'), JsonBounds{}).ok());
}

TEST(RequestJson, ValuesPastTheBoundAreRefusedByName) {
  JsonBounds bounds;
  bounds.max_values = 1000;
  std::string wide = "[0";
  for (int i = 0; i < 1000; ++i) wide += ",0";
  wide += "]";
  absl::StatusOr<nlohmann::ordered_json> got = ParseBoundedJson(wide, bounds);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "the request body holds more than 1000 JSON values");
  bounds.max_values = 1002;  // the array and its 1001 numbers
  EXPECT_TRUE(ParseBoundedJson(wide, bounds).ok());
}

TEST(RequestJson, BrokenJsonIsRefusedAsBefore) {
  for (const std::string text : {"", "{", "[1,]", "{\"a\" 1}", "nul", "1 2"}) {
    absl::StatusOr<nlohmann::ordered_json> got = ParseBoundedJson(text, JsonBounds{});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(got.status().message(), "the request body is not valid JSON") << text;
  }
}

TEST(RequestJson, TheRequestBoundsLeaveRoomForEveryPromptAsTokenIds) {
  RequestLimits limits;
  limits.max_prompts = 8;
  limits.max_prompt_tokens = 2048;
  EXPECT_EQ(RequestJsonBounds(limits).max_values, 8u * 2048u + 4096u);
}

}  // namespace
}  // namespace seam::coordinator::http

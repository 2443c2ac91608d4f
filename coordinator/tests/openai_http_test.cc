// The OpenAI-compatible front end without processes: how statuses become
// HTTP answers, and how request bodies become GenerateRequests (with Qwen3's
// real tokenizer and chat template from tests/fixtures/tokenizer/qwen3).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "http/http_errors.h"
#include "http/openai_request.h"
#include "http/openai_server.h"
#include "service/model_text.h"

namespace seam::coordinator::http {
namespace {

RequestLimits Limits() {
  RequestLimits l;
  l.vocab_size = 151936;
  l.max_positions = 4096;
  l.max_prompt_tokens = 2048;
  l.max_prompts = 8;
  return l;
}

const ModelText* Qwen3Text() {
  static const std::unique_ptr<ModelText> text = [] {
    auto t = ModelText::Load(std::string(SEAM_TOKENIZER_FIXTURES) + "/qwen3");
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(*t) : nullptr;
  }();
  return text.get();
}

TEST(HttpErrors, StatusesMapLikeTheGrpcApi) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
}

TEST(HttpErrors, BodyIsOpenAiShaped) {
  const auto body = nlohmann::json::parse(ErrorBody(absl::ResourceExhaustedError("queue is full")));
  EXPECT_EQ(body["error"]["message"], "queue is full");
  EXPECT_EQ(body["error"]["type"], "rate_limit_error");
  EXPECT_EQ(body["error"]["code"], "resource_exhausted");
}

TEST(OpenAiRequest, TextPromptIsTokenizedWithTheCheckpointsTokenizer) {
  auto r = ParseOpenAiRequest(R"({"model": "m", "prompt": "The capital of France is", "max_tokens": 4})", false,
                              "cmpl-1", Qwen3Text(), Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->generate.prompts_size(), 1);
  const std::vector<int32_t> ids = Qwen3Text()->Encode("The capital of France is");
  EXPECT_EQ(std::vector<int32_t>(r->generate.prompts(0).token_ids().begin(), r->generate.prompts(0).token_ids().end()),
            ids);
  EXPECT_EQ(r->prompt_tokens, std::vector<int>{static_cast<int>(ids.size())});
  EXPECT_EQ(r->generate.sampling().max_new_tokens(), 4u);
  EXPECT_FLOAT_EQ(r->generate.sampling().temperature(), 1.0f);  // OpenAI's default
  ASSERT_EQ(r->generate.sampling().stop_token_ids_size(), 1);     // the tokenizer's EOS
  EXPECT_EQ(r->generate.sampling().stop_token_ids(0), *Qwen3Text()->tokenizer().eos_id());
  EXPECT_EQ(r->generate.request_id(), "cmpl-1");
}

TEST(OpenAiRequest, TokenIdPromptsTimesNBecomeOnePromptPerChoice) {
  auto r = ParseOpenAiRequest(R"({"prompt": [[1, 2, 3], [4]], "n": 3, "ignore_eos": true})", false, "c", nullptr,
                              Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->generate.prompts_size(), 6);
  EXPECT_EQ(r->generate.prompts(2).token_ids_size(), 3);
  EXPECT_EQ(r->generate.prompts(3).token_ids_size(), 1);
  EXPECT_EQ(r->prompt_tokens, (std::vector<int>{3, 1}));
  EXPECT_EQ(r->generate.sampling().stop_token_ids_size(), 0);
}

TEST(OpenAiRequest, ChatIsRenderedWithTheChatTemplate) {
  auto r = ParseOpenAiRequest(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "stream": true,
          "stream_options": {"include_usage": true}, "max_completion_tokens": 7, "temperature": 0})",
      true, "chat", Qwen3Text(), Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->generate.sampling().max_new_tokens(), 7u);
  const std::vector<int32_t> expected =
      Qwen3Text()->Encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false);
  EXPECT_EQ(std::vector<int32_t>(r->generate.prompts(0).token_ids().begin(), r->generate.prompts(0).token_ids().end()),
            expected);
}

TEST(OpenAiRequest, RefusalsNameWhatIsWrong) {
  const auto refused = [](const std::string& body, bool chat, const ModelText* text) {
    auto r = ParseOpenAiRequest(body, chat, "x", text, Limits());
    return r.ok() ? absl::OkStatus() : r.status();
  };
  EXPECT_EQ(refused("{not json", false, nullptr).message(), "the request body is not valid JSON");
  EXPECT_TRUE(absl::IsInvalidArgument(refused(R"({"prompt": [1], "stop": ["\n"]})", false, nullptr)));
  EXPECT_NE(refused(R"({"prompt": [1], "stop": ["\n"]})", false, nullptr).message().find("stop_token_ids"),
            std::string::npos);
  EXPECT_NE(refused(R"({"prompt": [1], "max_tokens": 0})", false, nullptr).message().find("max_tokens"),
            std::string::npos);
  EXPECT_NE(refused(R"({"prompt": [1], "n": 9})", false, nullptr).message().find("'n'"), std::string::npos);
  EXPECT_NE(refused(R"({"prompt": [[1], [2], [3]], "n": 3})", false, nullptr).message().find("sequences"),
            std::string::npos);
  EXPECT_NE(refused(R"({"messages": []})", true, Qwen3Text()).message().find("messages"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(refused(R"({"prompt": [1], "temperature": "hot"})", false, nullptr)));
  // Text without a tokenizer: the checkpoint, not the request, must change.
  EXPECT_TRUE(absl::IsFailedPrecondition(refused(R"({"prompt": "hello"})", false, nullptr)));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      refused(R"({"messages": [{"role": "user", "content": "hi"}]})", true, nullptr)));
}

TEST(OpenAiServerOptions, PlaintextOnlyOnLoopbackOrWithInsecure) {
  OpenAiServerOptions o;
  o.listen = "127.0.0.1:0";
  EXPECT_TRUE(OpenAiServer::CheckOptions(o).ok());
  o.listen = "0.0.0.0:8000";
  const absl::Status refused = OpenAiServer::CheckOptions(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("--http-listen: refusing to listen on 0.0.0.0:8000 without TLS"), std::string::npos)
      << refused;
  o.security.insecure = true;
  EXPECT_TRUE(OpenAiServer::CheckOptions(o).ok());
  o.listen = "localhost";
  EXPECT_TRUE(absl::IsInvalidArgument(OpenAiServer::CheckOptions(o)));
  o.listen = "127.0.0.1:0";
  o.security.tls_key_file = "key.pem";  // a key without its certificate
  EXPECT_TRUE(absl::IsInvalidArgument(OpenAiServer::CheckOptions(o)));
}

TEST(TextStream, HoldsBackACharacterSplitOverTokens) {
  const ModelText* text = Qwen3Text();
  const std::vector<int32_t> ids = text->Encode("héllo 🌍 世界");
  TextStream stream(text);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.Push({id});
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "no U+FFFD from a split character";
    streamed += piece;
  }
  streamed += stream.Flush();
  EXPECT_EQ(streamed, "héllo 🌍 世界");
}

}  // namespace
}  // namespace seam::coordinator::http

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

TEST(OpenAiRequest, CacheSaltReachesTheGenerateRequestAndMustBeAString) {
  auto r = ParseOpenAiRequest(R"({"prompt": [1, 2], "cache_salt": "tenant-7"})", false, "c", nullptr, Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.cache_salt(), "tenant-7");
  auto bad = ParseOpenAiRequest(R"({"prompt": [1, 2], "cache_salt": 7})", false, "c", nullptr, Limits());
  ASSERT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_EQ(bad.status().message(), "'cache_salt' must be a string");
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

TEST(OpenAiRequest, EveryParameterSeamDoesNotImplementIsRefusedByName) {
  const auto message = [](const std::string& body, bool chat) {
    auto r = ParseOpenAiRequest(body, chat, "x", Qwen3Text(), Limits());
    EXPECT_TRUE(!r.ok() && absl::IsInvalidArgument(r.status())) << body;
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  const std::string chat = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(message(R"({"prompt": [1], "echo": true})", false), "'echo' is not supported (the answer never repeats the prompt)");
  EXPECT_EQ(message(R"({"prompt": [1], "suffix": "end"})", false), "'suffix' is not supported (no insertion)");
  EXPECT_EQ(message(R"({"prompt": [1], "best_of": 3})", false), "'best_of' is not supported (one sequence per choice)");
  EXPECT_EQ(message("{" + chat + R"(, "response_format": {"type": "json_object"}})", true),
            "'response_format' is not supported: only {\"type\": \"text\"}");
  EXPECT_EQ(message("{" + chat + R"(, "tools": [{"type": "function", "function": {"name": "f"}}]})", true),
            "'tools' are not supported (no tool calls)");
  EXPECT_EQ(message("{" + chat + R"(, "n": 1, "top_logprobs": 2})", true), "'top_logprobs' needs 'logprobs': true");
  EXPECT_EQ(message(R"({"prompt": [1], "min_p": 0.1})", false), "'min_p' is not a parameter /v1/completions takes");
  EXPECT_EQ(message(R"({"prompt": [1], "messages": []})", false), "'messages' is not a parameter /v1/completions takes");
  EXPECT_EQ(message("{" + chat + R"(, "stream_options": {"include_obfuscation": true}})", true),
            "'stream_options.include_obfuscation' is not supported");
  // Defaults and fields without effect on the answer pass.
  auto ok = ParseOpenAiRequest("{" + chat + R"(, "echo_x": 1})", true, "x", Qwen3Text(), Limits());
  EXPECT_FALSE(ok.ok());
  ok = ParseOpenAiRequest("{" + chat + R"(, "user": "u", "tools": [], "tool_choice": "none", "store": false,
      "response_format": {"type": "text"}, "modalities": ["text"], "metadata": {"a": "b"}})",
                          true, "x", Qwen3Text(), Limits());
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(OpenAiRequest, SamplingParametersAreRead) {
  auto r = ParseOpenAiRequest(R"({"prompt": "hi", "stop": ["\n\n", "END"], "presence_penalty": 0.5,
      "frequency_penalty": -0.25, "repetition_penalty": 1.1, "logit_bias": {"42": -100, "7": 2.5},
      "min_tokens": 3, "logprobs": 2, "seed": 99, "max_tokens": 5})", false, "x", Qwen3Text(), Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SamplingParams& s = r->generate.sampling();
  EXPECT_EQ(std::vector<std::string>(s.stop().begin(), s.stop().end()), (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), -0.25f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.1f);
  ASSERT_EQ(s.logit_bias_size(), 2);
  EXPECT_EQ(s.logit_bias(0).token_id(), 42);
  EXPECT_FLOAT_EQ(s.logit_bias(0).bias(), -100.0f);
  EXPECT_EQ(s.min_tokens(), 3u);
  EXPECT_TRUE(s.logprobs());
  EXPECT_EQ(s.top_logprobs(), 2u);
  EXPECT_TRUE(r->logprobs);
  ASSERT_TRUE(s.has_seed());
  EXPECT_EQ(s.seed(), 99u);
  auto unseeded = ParseOpenAiRequest(R"({"prompt": [1, 2]})", false, "x", nullptr, Limits());
  ASSERT_TRUE(unseeded.ok()) << unseeded.status();
  EXPECT_FALSE(unseeded->generate.sampling().has_seed());  // the driver draws one
  EXPECT_EQ(unseeded->generate.sampling().max_new_tokens(), 0u);  // the server's default (16)
}

TEST(OpenAiRequest, ChatWithoutMaxTokensMayFillTheContext) {
  auto r = ParseOpenAiRequest(R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true,
      "top_logprobs": 3})", true, "x", Qwen3Text(), Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.sampling().max_new_tokens(),
            static_cast<uint32_t>(Limits().max_positions - r->prompt_tokens[0]));
  EXPECT_EQ(r->top_logprobs, 3);
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

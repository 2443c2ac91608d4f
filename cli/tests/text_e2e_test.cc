// Text over gRPC: a LocalPipeline serving a tiny random Qwen3 checkpoint whose
// vocabulary covers Qwen3's real tokenizer (tests/fixtures/tokenizer/qwen3
// copied beside it). Text prompts are tokenized by the coordinator exactly as
// the tokenizer does, completions carry text decoded from their ids, the
// streamed text adds up to the whole, and `seam generate "text"` prints it.
// The sampling and parameter cases over gRPC: sequences without a seed (and
// every sequence of one call) drawing their own tokens, a seed reproducing
// a sequence's tokens whatever call it is in, stop strings, logit_bias and
// log-probs reaching the last stage, GetMetadata's enforced limits.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "local_pipeline.h"
#include "seam/testing/temp_dir.h"
#include "seam/tokenizer/tokenizer.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::cli {
namespace {

constexpr int kQwen3Vocab = 151936;

bool Built() { return access((std::string(SEAM_BIN_DIR) + "/seam-stage").c_str(), X_OK) == 0; }

// Hidden 64, 2 layers: small enough for the CPU; Qwen3's vocabulary.
void WriteTextModel(const std::string& dir) {
  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = 2;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.vocab_size = kQwen3Vocab;
  c.bos_token_id = 151643;
  c.eos_token_id = 151645;
  weights::RandomCheckpointOptions rc;
  rc.seed = 7;
  ASSERT_TRUE(weights::WriteRandomCheckpoint(c, rc, dir).ok());
  for (const char* f : {"tokenizer.json.gz", "tokenizer_config.json"}) {
    std::filesystem::copy_file(std::string(SEAM_TOKENIZER_FIXTURES) + "/qwen3/" + f, dir + "/" + f);
  }
}

class TextOverGrpc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Built()) return;
    model_ = new seam::testing::TempDir("seam_text_model");
    WriteTextModel(model_->path());
    auto tok = tokenizer::Tokenizer::Load(model_->path());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
    LocalPipelineOptions o;
    o.model_dir = model_->path();
    o.bin_dir = SEAM_BIN_DIR;
    o.pp = 2;
    auto p = LocalPipeline::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    pipeline_ = p->release();
  }
  static void TearDownTestSuite() {
    delete pipeline_;
    delete tokenizer_;
    delete model_;
  }
  void SetUp() override {
    if (!Built()) GTEST_SKIP() << "seam-stage is not built";
    ASSERT_NE(pipeline_, nullptr);
    stub_ = v1::Coordinator::NewStub(pipeline_->ClientChannel());
  }
  static std::unique_ptr<grpc::ClientContext> Context() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  }
  static v1::GenerateRequest Greedy(int max_new_tokens) {
    v1::GenerateRequest r;
    r.set_request_id("text-test");
    r.mutable_sampling()->set_max_new_tokens(max_new_tokens);
    return r;
  }
  // The tokenizer's text of generated ids (ids past its vocabulary are the
  // model's padding rows and have no text).
  static std::string Expected(const google::protobuf::RepeatedField<int32_t>& ids) {
    std::vector<int32_t> known;
    for (int32_t id : ids) {
      if (id < tokenizer_->vocab_size()) known.push_back(id);
    }
    auto text = tokenizer_->Decode(known, /*skip_special_tokens=*/true);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  static seam::testing::TempDir* model_;
  static tokenizer::Tokenizer* tokenizer_;
  static LocalPipeline* pipeline_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};
seam::testing::TempDir* TextOverGrpc::model_ = nullptr;
tokenizer::Tokenizer* TextOverGrpc::tokenizer_ = nullptr;
LocalPipeline* TextOverGrpc::pipeline_ = nullptr;

TEST_F(TextOverGrpc, TextPromptsAreTokenizedAsIdsWouldBeAndCompletionsCarryText) {
  const std::vector<std::string> prompts = {"Hello, world! The capital of France is",
                                            "你好，世界 🌍 <|im_start|>user"};
  v1::GenerateRequest text = Greedy(8);
  v1::GenerateRequest ids = Greedy(8);
  for (const std::string& p : prompts) {
    text.add_text_prompts(p);
    const std::vector<int32_t> encoded = tokenizer_->Encode(p);
    ids.add_prompts()->mutable_token_ids()->Add(encoded.begin(), encoded.end());
  }
  v1::GenerateResult by_text, by_ids;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), text, &by_text).ok());
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), ids, &by_ids).ok());
  ASSERT_EQ(by_text.completions_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const v1::Completion& c = by_text.completions(i);
    EXPECT_EQ(c.prompt_tokens(), static_cast<uint32_t>(ids.prompts(i).token_ids_size())) << prompts[i];
    EXPECT_EQ(c.token_ids_size(), 8);
    EXPECT_EQ(c.finish_reason(), v1::FINISH_REASON_MAX_NEW_TOKENS);
    // Greedy over the same ids: the same tokens, whichever way the prompt came.
    EXPECT_EQ(std::vector<int32_t>(c.token_ids().begin(), c.token_ids().end()),
              std::vector<int32_t>(by_ids.completions(i).token_ids().begin(), by_ids.completions(i).token_ids().end()));
    EXPECT_EQ(c.text(), Expected(c.token_ids()));
    EXPECT_EQ(by_ids.completions(i).text(), c.text());  // id prompts get text too
  }
}

TEST_F(TextOverGrpc, StreamedTextAddsUpToTheWholeText) {
  v1::GenerateRequest request = Greedy(12);
  request.add_text_prompts("Once upon a time");
  v1::GenerateResult whole;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &whole).ok());
  auto context = Context();
  auto reader = stub_->Generate(context.get(), request);
  v1::GenerateResponse r;
  std::string streamed;
  int tokens = 0;
  while (reader->Read(&r)) {
    streamed += r.text();
    tokens += r.token_ids_size();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 12);
  EXPECT_EQ(streamed, whole.completions(0).text());
}

TEST_F(TextOverGrpc, PromptsAndTextPromptsTogetherAreInvalid) {
  v1::GenerateRequest request = Greedy(2);
  request.add_text_prompts("hi");
  request.add_prompts()->add_token_ids(3);
  v1::GenerateResult result;
  const grpc::Status status = stub_->GenerateAll(Context().get(), request, &result);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("both prompts and text_prompts"), std::string::npos)
      << status.error_message();
}

v1::GenerateRequest Sampled(int max_new_tokens, const std::vector<std::string>& prompts) {
  v1::GenerateRequest r;
  r.set_request_id("sampled");
  r.mutable_sampling()->set_max_new_tokens(max_new_tokens);
  r.mutable_sampling()->set_temperature(1.0f);
  for (const std::string& p : prompts) r.add_text_prompts(p);
  return r;
}

std::vector<int32_t> Ids(const v1::Completion& c) { return {c.token_ids().begin(), c.token_ids().end()}; }

TEST_F(TextOverGrpc, WithoutASeedEveryCallAndEverySequenceDrawsItsOwnTokens) {
  const v1::GenerateRequest request = Sampled(10, {"Once upon a time", "Once upon a time"});
  v1::GenerateResult a, b;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &a).ok());
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &b).ok());
  EXPECT_NE(Ids(a.completions(0)), Ids(a.completions(1)));  // two sequences of one call
  EXPECT_NE(Ids(a.completions(0)), Ids(b.completions(0)));  // two calls
}

TEST_F(TextOverGrpc, ASeedGivesTheSameTokensWhateverTheCallAroundTheSequence) {
  v1::GenerateRequest alone = Sampled(10, {"Once upon a time"});
  alone.mutable_sampling()->set_seed(9);
  v1::GenerateRequest with_others = Sampled(10, {"Once upon a time", "Hello", "The capital of France is"});
  with_others.mutable_sampling()->set_seed(9);
  v1::GenerateResult one, three;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), alone, &one).ok());
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), with_others, &three).ok());
  EXPECT_EQ(Ids(one.completions(0)), Ids(three.completions(0)));
  EXPECT_NE(Ids(three.completions(0)), Ids(three.completions(1)));
}

TEST_F(TextOverGrpc, AStopStringEndsTheTextBeforeItStreamedOrNot) {
  v1::GenerateRequest request = Greedy(20);
  request.add_text_prompts("The capital of France is");
  v1::GenerateResult whole;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &whole).ok());
  const std::string text = whole.completions(0).text();
  ASSERT_GT(text.size(), 12u) << text;
  // Three bytes from the middle, on a character boundary.
  size_t at = text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  size_t end = at + 1;
  while (end < text.size() && (end - at < 3 || (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)) ++end;
  const std::string stop = text.substr(at, end - at);
  const std::string expected = text.substr(0, text.find(stop));
  request.mutable_sampling()->add_stop(stop);
  v1::GenerateResult stopped;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &stopped).ok());
  EXPECT_EQ(stopped.completions(0).text(), expected);
  EXPECT_EQ(stopped.completions(0).finish_reason(), v1::FINISH_REASON_STOP_STRING);
  EXPECT_LT(stopped.completions(0).token_ids_size(), 20);
  auto context = Context();
  auto reader = stub_->Generate(context.get(), request);
  v1::GenerateResponse r;
  std::string streamed;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&r)) {
    streamed += r.text();
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = r.finish_reason();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(streamed, expected);
  EXPECT_EQ(finish, v1::FINISH_REASON_STOP_STRING);
}

TEST_F(TextOverGrpc, LogitBiasAndLogprobsReachTheLastStage) {
  v1::GenerateRequest request = Greedy(4);
  request.add_text_prompts("Once upon a time");
  v1::LogitBias* bias = request.mutable_sampling()->add_logit_bias();
  bias->set_token_id(9707);
  bias->set_bias(100.0f);
  request.mutable_sampling()->set_logprobs(true);
  request.mutable_sampling()->set_top_logprobs(2);
  v1::GenerateResult result;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &result).ok());
  const v1::Completion& c = result.completions(0);
  EXPECT_EQ(Ids(c), (std::vector<int32_t>{9707, 9707, 9707, 9707}));
  ASSERT_EQ(c.logprobs_size(), 4);
  for (const v1::ChosenTokenLogprobs& lp : c.logprobs()) {
    EXPECT_EQ(lp.token_id(), 9707);
    EXPECT_LT(lp.logprob(), 0.0f);
    ASSERT_EQ(lp.top_size(), 2);
    EXPECT_GE(lp.top(0).logprob(), lp.logprob());  // the model's own most likely, before the bias
  }
}

TEST_F(TextOverGrpc, MetadataStatesTheLimitsTheServerEnforces) {
  v1::Metadata metadata;
  ASSERT_TRUE(stub_->GetMetadata(Context().get(), v1::GetMetadataRequest(), &metadata).ok());
  const uint32_t max_len = metadata.limits().max_model_len();
  EXPECT_GT(max_len, 0u);
  EXPECT_LE(max_len, metadata.model().max_position_embeddings());
  EXPECT_GT(metadata.limits().max_prompt_tokens(), 0u);
  EXPECT_EQ(metadata.limits().default_max_tokens(), 16u);
  v1::GenerateRequest over = Greedy(1);
  const std::vector<int32_t> long_prompt(metadata.limits().max_prompt_tokens() + 1, 5);
  over.add_prompts()->mutable_token_ids()->Add(long_prompt.begin(), long_prompt.end());
  v1::GenerateResult result;
  const grpc::Status refused = stub_->GenerateAll(Context().get(), over, &result);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
  // The prompts of one request: the stated count is the one enforced.
  EXPECT_EQ(metadata.limits().max_prompts(), 64u);
  EXPECT_EQ(metadata.limits().max_request_id_bytes(), 128u);
  EXPECT_EQ(metadata.limits().max_top_logprobs(), 20u);
  v1::GenerateRequest many = Greedy(1);
  for (uint32_t i = 0; i <= metadata.limits().max_prompts(); ++i) many.add_prompts()->add_token_ids(5);
  const grpc::Status too_many = stub_->GenerateAll(Context().get(), many, &result);
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_many.error_message().find("has 65 prompts, more than the 64 allowed"), std::string::npos)
      << too_many.error_message();
}

TEST_F(TextOverGrpc, SeamGeneratePrintsTheText) {
  v1::GenerateRequest request = Greedy(6);
  request.add_text_prompts("The quick brown fox");
  v1::GenerateResult whole;
  ASSERT_TRUE(stub_->GenerateAll(Context().get(), request, &whole).ok());
  const security::ClientSecurityOptions& s = pipeline_->client_security();
  const std::string command = std::string(SEAM_BINARY) + " generate --addr " + pipeline_->coordinator_address() +
                              " --tls-ca " + s.tls_ca_file + " --auth-token-file " + s.auth_token_file +
                              " --max-new-tokens 6 'The quick brown fox'";
  for (const char* stream : {"", " --stream"}) {
    FILE* pipe = popen((command + stream).c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    EXPECT_EQ(pclose(pipe), 0) << out;
    EXPECT_EQ(out, whole.completions(0).text() + "\n") << "seam generate" << stream;
  }
}

}  // namespace
}  // namespace seam::cli

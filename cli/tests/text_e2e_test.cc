// Text over gRPC: a LocalPipeline serving a tiny random Qwen3 checkpoint whose
// vocabulary covers Qwen3's real tokenizer (tests/fixtures/tokenizer/qwen3
// copied beside it). Text prompts are tokenized by the coordinator exactly as
// the tokenizer does, completions carry text decoded from their ids, the
// streamed text adds up to the whole, and `seam generate "text"` prints it.
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

// Who may use a pipeline: a LocalPipeline (TLS, mutual TLS between the
// coordinator and the stages, a bearer token on the client API) reached over
// real gRPC on loopback with certificates from security::WriteLocalCredentials.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>

#include "local_pipeline.h"
#include "seam/testing/temp_dir.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "seam/v1/stage_service.grpc.pb.h"

namespace seam::cli {
namespace {

bool Built() { return access((std::string(SEAM_BIN_DIR) + "/seam-stage").c_str(), X_OK) == 0; }

std::string ModelDir() {
  static const seam::testing::TempDir dir("seam_auth_model");
  static const bool written = [] {
    EXPECT_TRUE(WriteDefaultModel(dir.path()).ok());
    return true;
  }();
  (void)written;
  return dir.path();
}

std::unique_ptr<grpc::ClientContext> Context(int seconds) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return c;
}

std::shared_ptr<grpc::Channel> Channel(const security::ClientSecurityOptions& o, const std::string& target) {
  auto channel = security::MakeChannel(o, target);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return *channel;
}

grpc::Status GetMetadata(const std::shared_ptr<grpc::Channel>& channel) {
  v1::Metadata m;
  return v1::Coordinator::NewStub(channel)->GetMetadata(Context(10).get(), v1::GetMetadataRequest(), &m);
}

// One unary call of `method` with an empty message through a generic stub.
grpc::Status Generic(const std::shared_ptr<grpc::Channel>& channel, const std::string& method) {
  grpc::GenericStub stub(channel);
  auto context = Context(10);
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

class AuthE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Built()) return;
    LocalPipelineOptions o;
    o.model_dir = ModelDir();
    o.bin_dir = SEAM_BIN_DIR;
    o.startup_timeout = std::chrono::seconds(30);
    auto p = LocalPipeline::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    if (p.ok()) pipeline_ = p->release();
  }
  static void TearDownTestSuite() {
    delete pipeline_;
    pipeline_ = nullptr;
  }
  void SetUp() override {
    if (!Built()) GTEST_SKIP() << "no seam-stage";
    ASSERT_NE(pipeline_, nullptr);
    ASSERT_TRUE(pipeline_->client_security().tls());
  }
  static LocalPipeline* pipeline_;
  seam::testing::TempDir dir_{"seam_auth_e2e"};
};
LocalPipeline* AuthE2e::pipeline_ = nullptr;

TEST_F(AuthE2e, ClientWithTheTokenIsServed) {
  EXPECT_TRUE(GetMetadata(pipeline_->ClientChannel()).ok());
  v1::GenerateRequest request;
  request.set_request_id("auth");
  request.add_prompts()->mutable_token_ids()->Add(3);
  request.mutable_sampling()->set_max_new_tokens(2);
  v1::GenerateResult result;
  const grpc::Status s =
      v1::Coordinator::NewStub(pipeline_->ClientChannel())->GenerateAll(Context(30).get(), request, &result);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(result.completions(0).token_ids_size(), 2);
}

TEST_F(AuthE2e, ClientWithoutATokenIsUnauthenticated) {
  security::ClientSecurityOptions no_token = pipeline_->client_security();
  no_token.auth_token_file.clear();
  const auto channel = Channel(no_token, pipeline_->coordinator_address());
  const grpc::Status s = GetMetadata(channel);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  v1::GenerateRequest request;
  request.add_prompts()->mutable_token_ids()->Add(3);
  v1::GenerateResult result;
  EXPECT_EQ(v1::Coordinator::NewStub(channel)->GenerateAll(Context(10).get(), request, &result).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Probes need no token; reflection does.
  EXPECT_TRUE(Generic(channel, "/grpc.health.v1.Health/Check").ok());
  EXPECT_EQ(Generic(channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthE2e, AWrongTokenIsUnauthenticated) {
  seam::testing::WriteText(dir_.File("token"), "not-the-token\n");
  security::ClientSecurityOptions wrong = pipeline_->client_security();
  wrong.auth_token_file = dir_.File("token");
  const grpc::Status s = GetMetadata(Channel(wrong, pipeline_->coordinator_address()));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_EQ(s.error_message(), "the bearer token is not valid");
}

TEST_F(AuthE2e, PlaintextToTheTlsCoordinatorFails) {
  const grpc::Status s = GetMetadata(Channel({}, pipeline_->coordinator_address()));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(AuthE2e, StageShutdownWithoutTheCoordinatorsCertificateCannotConnect) {
  security::ClientSecurityOptions anonymous;  // trusts the stage's certificate, has none of its own
  anonymous.tls_ca_file = pipeline_->client_security().tls_ca_file;
  for (const security::ClientSecurityOptions& client : {anonymous, security::ClientSecurityOptions{}}) {
    v1::StageStatus status;
    const grpc::Status s = v1::StageControl::NewStub(Channel(client, pipeline_->stage_address(0)))
                               ->Shutdown(Context(5).get(), v1::ShutdownRequest(), &status);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  EXPECT_EQ(pipeline_->ExitedProcess(), "");
  // The coordinator's own certificate still reaches the stage, and the pipeline serves.
  v1::StageStatus status;
  const grpc::Status s = v1::StageControl::NewStub(Channel(pipeline_->stage_client_security(), pipeline_->stage_address(0)))
                             ->GetStatus(Context(5).get(), v1::GetStatusRequest(), &status);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(status.state(), v1::STAGE_STATE_READY);
  EXPECT_TRUE(GetMetadata(pipeline_->ClientChannel()).ok());
}

// seam-coordinator with `args` (after --model and --stages); its exit code.
int RunCoordinator(std::vector<std::string> args) {
  args.insert(args.begin(), {std::string(SEAM_BIN_DIR) + "/seam-coordinator", "--model", ModelDir(), "--stages",
                             "127.0.0.1:1", "--startup-timeout", "1s"});
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(AuthE2eListen, CoordinatorRefusesPlaintextOffLoopbackUnlessInsecure) {
  if (!Built()) GTEST_SKIP() << "no seam-coordinator";
  EXPECT_EQ(RunCoordinator({"--listen", "0.0.0.0:0"}), 2);
  // Past the check: it then waits for the (absent) stage and gives up with 1.
  EXPECT_EQ(RunCoordinator({"--listen", "0.0.0.0:0", "--insecure"}), 1);
  EXPECT_EQ(RunCoordinator({"--listen", "127.0.0.1:0"}), 1);
  EXPECT_EQ(RunCoordinator({"--listen", "127.0.0.1:0", "--tls-cert", "/nonexistent.crt", "--tls-key", "/x.key"}), 2);
}

}  // namespace
}  // namespace seam::cli

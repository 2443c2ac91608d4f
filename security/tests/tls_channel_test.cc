// Real gRPC on loopback with certificates from WriteLocalCredentials: a
// server holding only grpc.health.v1 (open to probes) and answering every
// other method UNIMPLEMENTED once a call got past the token check.
#include <future>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include "seam/security/bearer_token.h"
#include "seam/security/credentials.h"
#include "seam/security/local_credentials.h"
#include "seam/testing/temp_dir.h"

namespace seam::security {
namespace {

class TestServer {
 public:
  explicit TestServer(ServerSecurityOptions options, const std::string& listen = "127.0.0.1:0") {
    options.open_path_prefixes = {kHealthPathPrefix};
    auto credentials = MakeServerCredentials(options, listen);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(listen, *credentials, &port_);
    builder.RegisterCallbackGenericService(&unimplemented_);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
  }
  ~TestServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  grpc::CallbackGenericService unimplemented_;
  std::unique_ptr<grpc::Server> server_;
};

// One unary call of `method` with an empty message, 5 s at most.
grpc::Status Call(const ClientSecurityOptions& options, const std::string& target, const std::string& method) {
  auto channel = MakeChannel(options, target);
  EXPECT_TRUE(channel.ok()) << channel.status();
  grpc::GenericStub stub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

constexpr char kHealth[] = "/grpc.health.v1.Health/Check";
constexpr char kOther[] = "/seam.test.Echo/Echo";

class TlsChannel : public ::testing::Test {
 protected:
  void SetUp() override {
    auto files = WriteLocalCredentials(dir_.path());
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *files;
  }
  seam::testing::TempDir dir_{"seam_tls_test"};
  LocalCredentialFiles files_;
};

TEST_F(TlsChannel, TlsClientWithTheCaIsServed) {
  TestServer server(files_.CoordinatorServer());
  EXPECT_TRUE(Call(files_.Client(), server.address(), kHealth).ok());
  EXPECT_EQ(Call(files_.Client(), server.address(), kOther).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(TlsChannel, PlaintextClientOfATlsServerFails) {
  TestServer server(files_.CoordinatorServer());
  const grpc::Status s = Call(ClientSecurityOptions{}, server.address(), kHealth);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsChannel, ClientTrustingAnotherCaFails) {
  TestServer server(files_.CoordinatorServer());
  const seam::testing::TempDir other_dir("seam_tls_other");
  auto other = WriteLocalCredentials(other_dir.path());
  ASSERT_TRUE(other.ok());
  const grpc::Status s = Call(other->Client(), server.address(), kHealth);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsChannel, TokenIsRequiredExceptForHealth) {
  TestServer server(files_.CoordinatorServer());
  ClientSecurityOptions no_token = files_.Client();
  no_token.auth_token_file.clear();
  const grpc::Status missing = Call(no_token, server.address(), kOther);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED) << missing.error_message();
  EXPECT_TRUE(Call(no_token, server.address(), kHealth).ok());

  seam::testing::WriteText(dir_.File("wrong"), "0123\n");
  ClientSecurityOptions wrong = files_.Client();
  wrong.auth_token_file = dir_.File("wrong");
  const grpc::Status refused = Call(wrong, server.address(), kOther);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  EXPECT_EQ(refused.error_message(), "the bearer token is not valid");
}

TEST_F(TlsChannel, MutualTlsNeedsAClientCertificateOfTheClientCa) {
  TestServer server(files_.StageServer());
  EXPECT_TRUE(Call(files_.CoordinatorToStages(), server.address(), kHealth).ok());
  ClientSecurityOptions no_certificate = files_.CoordinatorToStages();
  no_certificate.tls_client_cert_file.clear();
  no_certificate.tls_client_key_file.clear();
  EXPECT_EQ(Call(no_certificate, server.address(), kHealth).error_code(), grpc::StatusCode::UNAVAILABLE);

  const seam::testing::TempDir other_dir("seam_tls_other");
  auto other = WriteLocalCredentials(other_dir.path());
  ASSERT_TRUE(other.ok());
  ClientSecurityOptions foreign = files_.CoordinatorToStages();  // trusts the server, signed elsewhere
  foreign.tls_client_cert_file = other->client_cert;
  foreign.tls_client_key_file = other->client_key;
  EXPECT_EQ(Call(foreign, server.address(), kHealth).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsChannel, LoopbackPlaintextWithATokenStillChecksIt) {
  ServerSecurityOptions plain;
  plain.auth_token_file = files_.token;
  TestServer server(plain);
  ClientSecurityOptions with_token;
  with_token.auth_token_file = files_.token;
  EXPECT_EQ(Call(with_token, server.address(), kOther).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call(ClientSecurityOptions{}, server.address(), kOther).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Call(ClientSecurityOptions{}, server.address(), kHealth).ok());
}

TEST_F(TlsChannel, NonLoopbackPlaintextIsRefusedUnlessInsecure) {
  ServerSecurityOptions plain;
  EXPECT_EQ(MakeServerCredentials(plain, "0.0.0.0:0").status().code(), absl::StatusCode::kFailedPrecondition);
  plain.insecure = true;
  EXPECT_TRUE(MakeServerCredentials(plain, "0.0.0.0:0").ok());
  plain.auth_token_file = files_.token;  // a token in the clear over the network
  EXPECT_EQ(MakeServerCredentials(plain, "0.0.0.0:0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MakeServerCredentials(files_.CoordinatorServer(), "0.0.0.0:0").ok());
}

TEST_F(TlsChannel, HalfGivenFlagsAreInvalidArguments) {
  ServerSecurityOptions cert_only;
  cert_only.tls_cert_file = files_.server_cert;
  EXPECT_EQ(MakeServerCredentials(cert_only, "127.0.0.1:0").status().code(), absl::StatusCode::kInvalidArgument);
  ServerSecurityOptions missing = files_.StageServer();
  missing.tls_key_file = dir_.File("absent.key");
  const absl::Status s = MakeServerCredentials(missing, "127.0.0.1:0").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--tls-key"), std::string::npos) << s;
  ClientSecurityOptions token_to_remote;
  token_to_remote.auth_token_file = files_.token;
  EXPECT_EQ(MakeChannelCredentials(token_to_remote, "10.1.2.3:50050").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::security

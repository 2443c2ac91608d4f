// Who may reach a seam-stage: with --tls-client-ca only a client holding a
// certificate of that CA (the coordinator) gets a connection, so an
// anonymous Shutdown cannot stop the stage; plaintext is refused off
// loopback unless --insecure.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "seam/security/local_credentials.h"
#include "stage_process.h"

namespace seam::server {
namespace {

using namespace testing;  // NOLINT: the fixtures of these tests

std::vector<std::string> MutualTlsArgs(const security::LocalCredentialFiles& f) {
  return {"--tls-cert", f.server_cert, "--tls-key", f.server_key, "--tls-client-ca", f.ca_cert};
}

TEST(StageAuth, ShutdownWithoutTheCoordinatorsCertificateCannotConnect) {
  const seam::testing::TempDir dir("seam_stage_auth");
  auto files = security::WriteLocalCredentials(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  StageProcess stage(MutualTlsArgs(*files), files->CoordinatorToStages());
  v1::StageStatus status;
  ASSERT_TRUE(stage.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());

  security::ClientSecurityOptions anonymous;  // TLS, trusts the stage, no client certificate
  anonymous.tls_ca_file = files->ca_cert;
  security::ClientSecurityOptions plaintext;
  for (const security::ClientSecurityOptions& client : {anonymous, plaintext}) {
    auto channel = security::MakeChannel(client, "127.0.0.1:" + std::to_string(stage.port()));
    ASSERT_TRUE(channel.ok()) << channel.status();
    const grpc::Status shutdown =
        v1::StageControl::NewStub(*channel)->Shutdown(Context(5).get(), v1::ShutdownRequest(), &status);
    EXPECT_EQ(shutdown.error_code(), grpc::StatusCode::UNAVAILABLE) << shutdown.error_message();
  }
  EXPECT_FALSE(stage.SignalAndWait(0, 1.0).has_value()) << "the stage exited";
  EXPECT_TRUE(stage.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.state(), v1::STAGE_STATE_UNCONFIGURED);
}

// Runs seam-stage with `args`; the exit code, or -1 when it is still running
// after `seconds` (then it is killed) having written its port file.
int RunStage(std::vector<std::string> args, double seconds, bool* wrote_port) {
  const seam::testing::TempDir dir("seam_stage_listen");
  const std::string port_file = dir.File("port"), log = dir.File("log");
  args.insert(args.begin(), SEAM_STAGE_BINARY);
  args.insert(args.end(), {"--port-file", port_file, "--log-level", "warn"});
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  *wrote_port = false;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (std::ifstream(port_file).good()) *wrote_port = true;
    if (*wrote_port) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return -1;
}

TEST(StageAuth, PlaintextOffLoopbackRefusesToStartUnlessInsecure) {
  bool wrote_port = false;
  EXPECT_EQ(RunStage({"--listen", "0.0.0.0:0"}, 20, &wrote_port), 2);
  EXPECT_FALSE(wrote_port);
  EXPECT_EQ(RunStage({"--listen", "0.0.0.0:0", "--insecure"}, 20, &wrote_port), -1);
  EXPECT_TRUE(wrote_port);
}

}  // namespace
}  // namespace seam::server

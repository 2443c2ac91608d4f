// Child-process management and the health check client for server tests.
#include "stage_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include <grpcpp/generic/generic_stub.h>

#include "seam/core/status.h"

namespace seam::server::testing {

std::unique_ptr<grpc::ClientContext> Context(double seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  return context;
}

StageProcess::StageProcess(const std::vector<std::string>& extra_args, const security::ClientSecurityOptions& client) {
  const std::string port_file = dir_.File("port");
  std::vector<std::string> args = {SEAM_STAGE_BINARY, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                   "--log-level", "warn"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = fork();
  SEAM_CHECK(pid_ >= 0);
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(port_file);
    if (in >> port_ && port_ > 0) break;
    int status = 0;
    SEAM_CHECK_MSG(waitpid(pid_, &status, WNOHANG) == 0, "seam-stage exited early, status ", status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  SEAM_CHECK_MSG(port_ > 0, "seam-stage wrote no port file within 20 s");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      security::MakeChannel(client, "127.0.0.1:" + std::to_string(port_));
  SEAM_CHECK_MSG(channel.ok(), channel.status().ToString());
  channel_ = *channel;
  stub_ = v1::StageControl::NewStub(channel_);
}

StageProcess::~StageProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

Health StageProcess::CheckHealth() {
  grpc::GenericStub generic(channel_);
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;
  std::unique_ptr<grpc::ClientContext> context = Context(5.0);
  std::promise<grpc::Status> done;
  generic.UnaryCall(context.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) return Health::kUnreachable;
  std::vector<grpc::Slice> slices;
  SEAM_CHECK(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse { ServingStatus status = 1; }: tag 0x08 then the value.
  if (bytes.size() < 2 || bytes[0] != 0x08) return Health::kUnknown;
  return static_cast<Health>(bytes[1]);
}

std::optional<int> StageProcess::SignalAndWait(int signal, double timeout_s) {
  kill(pid_, signal);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

}  // namespace seam::server::testing

// A seam-stage child process for end-to-end tests: started with --port-file
// in a fresh temporary directory, reached over real gRPC on loopback, stopped
// with SIGTERM (or killed when a test leaves it running).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "seam/security/credentials.h"
#include "seam/testing/temp_dir.h"
#include "seam/v1/stage_service.grpc.pb.h"

namespace seam::server::testing {

// grpc.health.v1 serving status values.
enum class Health { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3, kUnreachable = -1 };

class StageProcess {
 public:
  // Starts `binary` with --listen 127.0.0.1:0 --port-file ... plus `extra_args`
  // and waits (up to 20 s) for it to write its port. Aborts the test binary
  // with a message when it cannot. stub() and CheckHealth() reach it with
  // `client` (plaintext by default; the CA and client certificate when
  // `extra_args` turn on TLS).
  explicit StageProcess(const std::vector<std::string>& extra_args = {},
                        const security::ClientSecurityOptions& client = {});
  ~StageProcess();  // SIGKILL if still running

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  v1::StageControl::Stub& stub() { return *stub_; }
  // Overall health from grpc.health.v1.Health/Check.
  Health CheckHealth();
  // Sends `signal` and waits up to `timeout_s` for the exit status; nullopt on timeout.
  std::optional<int> SignalAndWait(int signal, double timeout_s);

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  seam::testing::TempDir dir_{"seam_stage_test"};  // the port file
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::StageControl::Stub> stub_;
};

// A client context whose call gives up after `seconds`.
std::unique_ptr<grpc::ClientContext> Context(double seconds = 30.0);

}  // namespace seam::server::testing

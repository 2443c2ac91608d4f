// ChildProcess: a local server process (seam-stage, seam-coordinator) started
// by `seam run` and the end-to-end tests. The child is killed if its parent
// dies (PR_SET_PDEATHSIG), and by the destructor, so none is left orphaned.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace seam::cli {

class ChildProcess {
 public:
  // Starts argv[0] with argv; stdout and stderr go to `log_path` (appended).
  // INTERNAL naming the binary when it cannot be started.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  ~ChildProcess();  // SIGKILL and reap if still running

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  bool Running();
  void Signal(int signal);
  // Sends SIGTERM, waits up to `grace`, then SIGKILL. Returns the wait status.
  int Stop(std::chrono::milliseconds grace);
  // Waits until `path` holds a port number. FAILED_PRECONDITION when the
  // child exits first, DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<int> WaitForPortFile(const std::string& path, std::chrono::milliseconds timeout);

 private:
  ChildProcess(pid_t pid, std::string name) : pid_(pid), name_(std::move(name)) {}
  pid_t pid_;
  std::string name_;
  bool reaped_ = false;
  int wait_status_ = 0;
};

// A waitpid status in words: "exited with exit code 2", "was killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

// Directory of the running executable (from /proc/self/exe).
std::string ExecutableDir();

}  // namespace seam::cli

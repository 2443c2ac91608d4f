// ChildProcess: fork/exec with the parent-death signal, polling waits.
#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace seam::cli {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                                  const std::string& log_path) {
  if (argv.empty() || access(argv[0].c_str(), X_OK) != 0) {
    return absl::InternalError(absl::StrCat("cannot run '", argv.empty() ? "" : argv[0], "': not an executable"));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return absl::InternalError(absl::StrCat("cannot open log file ", log_path));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log);
    return absl::InternalError(absl::StrCat("fork for ", argv[0], " failed"));
  }
  if (pid == 0) {  // only async-signal-safe calls from here on
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log);
  const std::string name = argv[0].substr(argv[0].find_last_of('/') + 1);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, name));
}

ChildProcess::~ChildProcess() {
  if (!Running()) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, &wait_status_, 0);
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  if (waitpid(pid_, &wait_status_, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

void ChildProcess::Signal(int signal) {
  if (Running()) kill(pid_, signal);
}

int ChildProcess::Stop(std::chrono::milliseconds grace) {
  Signal(SIGTERM);
  const auto end = std::chrono::steady_clock::now() + grace;
  while (Running() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (Running()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &wait_status_, 0);
    reaped_ = true;
  }
  return wait_status_;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return absl::StrCat("was killed by signal ", WTERMSIG(status), name != nullptr ? absl::StrCat(" (", name, ")") : "");
  }
  return absl::StrCat("stopped with wait status ", status);
}

absl::StatusOr<int> ChildProcess::WaitForPortFile(const std::string& path, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream f(path);
    int port = 0;
    if (f >> port && port > 0) return port;
    if (!Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name_, " (pid ", pid_, ") ", DescribeWaitStatus(wait_status_), " before writing ", path));
    }
    if (std::chrono::steady_clock::now() > end) {
      return absl::DeadlineExceededError(
          absl::StrCat(name_, " (pid ", pid_, ") wrote no port to ", path, " within ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace seam::cli

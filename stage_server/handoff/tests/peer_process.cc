// Forked peer processes and pipe channels for the two-process UCX tests.
#include "tests/peer_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "seam/core/status.h"

namespace seam::handoff::testing {
namespace {

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes, polling so the wait is bounded by `deadline`.
absl::Status ReadAll(int fd, void* data, size_t size, absl::Time deadline, const std::function<void()>& idle) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, idle ? 0 : 10);
    if (ready > 0) {
      const ssize_t n = ::read(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return absl::UnavailableError("peer closed the pipe");
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("no message from the peer in time");
    if (idle) idle();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Channel::Write(const std::string& message) {
  const uint64_t size = message.size();
  if (!WriteAll(write_fd_, &size, sizeof(size)) || !WriteAll(write_fd_, message.data(), message.size())) {
    return absl::UnavailableError("write to the peer's pipe failed");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Channel::Read(absl::Duration timeout, const std::function<void()>& idle) {
  const absl::Time deadline = absl::Now() + timeout;
  uint64_t size = 0;
  SEAM_RETURN_IF_ERROR(ReadAll(read_fd_, &size, sizeof(size), deadline, idle));
  std::string message(size, '\0');
  SEAM_RETURN_IF_ERROR(ReadAll(read_fd_, message.data(), size, deadline, idle));
  return message;
}

PeerProcess::PeerProcess(const std::function<int(Channel&)>& body) {
  int to_child[2];
  int to_parent[2];
  SEAM_CHECK(::pipe(to_child) == 0 && ::pipe(to_parent) == 0);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_ = ::fork();
  SEAM_CHECK(pid_ >= 0);
  if (pid_ == 0) {
    ::close(to_child[1]);
    ::close(to_parent[0]);
    Channel channel(to_child[0], to_parent[1]);
    const int code = body(channel);
    std::fflush(stderr);
    std::_Exit(code);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  channel_ = std::make_unique<Channel>(to_parent[0], to_child[1]);
}

PeerProcess::~PeerProcess() {
  if (!reaped_) {
    Kill();
    Wait(absl::Seconds(5)).IgnoreError();
  }
}

void PeerProcess::Kill() {
  if (!reaped_) ::kill(pid_, SIGKILL);
}

absl::StatusOr<int> PeerProcess::Wait(absl::Duration timeout, const std::function<void()>& idle) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return absl::InternalError(absl::StrCat("peer ended by signal ", WTERMSIG(status)));
    }
    if (absl::Now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      reaped_ = true;
      return absl::DeadlineExceededError("peer did not exit in time; killed");
    }
    if (idle) {
      idle();
    } else {
      ::usleep(2000);
    }
  }
}

UcxWorkerOptions ModeOptions(UcxErrorMode mode) {
  UcxWorkerOptions options;
  options.error_mode = mode;
  if (mode == UcxErrorMode::kPeer) options.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  return options;
}

const char* ModeName(UcxErrorMode mode) { return mode == UcxErrorMode::kPeer ? "PeerTcp" : "NoneSharedMemory"; }

bool ConnectChild(Channel& channel, UcxErrorMode mode, PeerSide& side) {
  auto worker = UcxWorker::Create(ModeOptions(mode));
  if (!worker.ok()) {
    std::fprintf(stderr, "peer: %s\n", worker.status().ToString().c_str());
    return false;
  }
  side.worker = *std::move(worker);
  if (!channel.Write(side.worker->Address()).ok()) return false;
  auto address = channel.Read(absl::Seconds(10));
  if (!address.ok()) return false;
  auto endpoint = side.worker->Connect(*address);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "peer: %s\n", endpoint.status().ToString().c_str());
    return false;
  }
  side.endpoint = *std::move(endpoint);
  return true;
}

absl::Status ConnectParent(Channel& channel, UcxErrorMode mode, PeerSide& side) {
  SEAM_ASSIGN_OR_RETURN(std::string address, channel.Read(absl::Seconds(10)));
  SEAM_ASSIGN_OR_RETURN(side.worker, UcxWorker::Create(ModeOptions(mode)));
  SEAM_RETURN_IF_ERROR(channel.Write(side.worker->Address()));
  SEAM_ASSIGN_OR_RETURN(side.endpoint, side.worker->Connect(address));
  return absl::OkStatus();
}

absl::Status SendUnbackedClaim(UcxWorker& worker, UcxEndpoint& endpoint, uint64_t tag, size_t size,
                               absl::Time deadline) {
  void* claim = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (claim == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat("mmap of ", size, " bytes failed"));
  const absl::Status sent = worker.Send(endpoint, tag, claim, size, deadline);
  ::munmap(claim, size);
  return sent;
}

}  // namespace seam::handoff::testing

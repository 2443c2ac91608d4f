// Test support: a forked peer process and a pipe channel to it, used to run
// the other side of a real UCX connection and to exchange worker addresses.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/handoff/ucx_worker.h"

namespace seam::handoff::testing {

// Two pipes: length-prefixed messages each way.
class Channel {
 public:
  Channel(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}
  absl::Status Write(const std::string& message);
  // Waits up to `timeout` for one message, calling `idle` (if set) between
  // polls so a UCX worker keeps progressing while it waits.
  absl::StatusOr<std::string> Read(absl::Duration timeout, const std::function<void()>& idle = {});

 private:
  int read_fd_;
  int write_fd_;
};

// Forks a child that runs `body` and exits with its result (0 = success)
// without returning into the test framework. Fork before this process makes
// its own UCX worker for the test.
class PeerProcess {
 public:
  explicit PeerProcess(const std::function<int(Channel&)>& body);
  ~PeerProcess();  // kills and reaps a child still running
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  Channel& channel() { return *channel_; }
  pid_t pid() const { return pid_; }
  void Kill();
  // Exit code of the child; DEADLINE_EXCEEDED (and the child killed) if it
  // runs past `timeout`; INTERNAL if a signal ended it. `idle` runs between
  // polls: a graceful UCX close in the child needs this side to progress.
  absl::StatusOr<int> Wait(absl::Duration timeout, const std::function<void()>& idle = {});

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::unique_ptr<Channel> channel_;
};

// Worker options of the two modes under test: PEER over TCP on loopback, and
// NONE, which lets UCX pick shared memory between processes of this host.
UcxWorkerOptions ModeOptions(UcxErrorMode mode);
const char* ModeName(UcxErrorMode mode);

// The child side of an address exchange: creates a worker, sends its address,
// reads the parent's and connects. Returns false (after printing why) on failure.
struct PeerSide {
  std::unique_ptr<UcxWorker> worker;
  UcxEndpoint endpoint;
};
bool ConnectChild(Channel& channel, UcxErrorMode mode, PeerSide& side);
// The parent side: reads the child's address, creates a worker, sends its own.
absl::Status ConnectParent(Channel& channel, UcxErrorMode mode, PeerSide& side);

// Sends a `size`-byte message with `tag` from an untouched MAP_NORESERVE
// mapping: a message that claims `size` bytes (64 GiB, say) while neither
// side needs that memory unless the receiver allocates the claimed length.
absl::Status SendUnbackedClaim(UcxWorker& worker, UcxEndpoint& endpoint, uint64_t tag, size_t size,
                               absl::Time deadline);

}  // namespace seam::handoff::testing

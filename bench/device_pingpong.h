// The floors that seam-bench-handoff device measures next to a device link,
// in the link's own two processes over its own UCX worker and endpoint (so
// the same UCX mode), on each process's own GPU:
//   UCX ping-pong     per hop, one 8-byte tagged message; no GPU work
//   kernel alone      this process launches the ticket kernel
//                     (ticket_kernel.h) on a stream of its own and spins on
//                     the mapped host ticket, as a device link's lanes wait
//                     for their kernel; the peer waits on UCX, with no GPU work
//   kernel ping-pong  per hop, that kernel and its ticket wait, then the
//                     message; the peer does the same when it arrives
// A cross-process handoff that runs a kernel on each side and sends one
// message per hop cannot beat the kernel ping-pong. With both processes on
// one GPU each hop also switches the GPU between their CUDA contexts, which
// kernel alone does not pay: kernel ping-pong - UCX ping-pong - kernel alone
// is that switch (and any other cost of alternating processes on the GPU).
// One-way = round trip / 2; kernel alone is one launch + wait.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/handoff/ucx_worker.h"

namespace seam::bench {

class PingPongFloors {
 public:
  // The stream and the mapped ticket on the calling thread's current GPU;
  // `watch`: the endpoint whose failure ends a wait (PEER mode), or null.
  // FAILED_PRECONDITION in a build without CUDA; CUDA errors naming the call.
  static absl::StatusOr<std::unique_ptr<PingPongFloors>> Create(handoff::UcxWorker& worker,
                                                                handoff::UcxEndpoint& endpoint,
                                                                const handoff::UcxEndpoint* watch);
  ~PingPongFloors();
  PingPongFloors(const PingPongFloors&) = delete;
  PingPongFloors& operator=(const PingPongFloors&) = delete;

  // This side: WARMUP + ITERS rounds; the microseconds of the last ITERS.
  absl::StatusOr<std::vector<double>> KernelAlone(int iters, int warmup);
  absl::StatusOr<std::vector<double>> PingUcx(int iters, int warmup);
  absl::StatusOr<std::vector<double>> PingKernel(int iters, int warmup);
  // The peer: answers `rounds` rounds of PingUcx / PingKernel.
  absl::Status PongUcx(int rounds);
  absl::Status PongKernel(int rounds);

 private:
  PingPongFloors(handoff::UcxWorker& worker, handoff::UcxEndpoint& endpoint, const handoff::UcxEndpoint* watch)
      : worker_(worker), endpoint_(endpoint), watch_(watch) {}
  // Launches the ticket kernel and spins until its ticket arrives (60 s bound).
  absl::Status KernelHop();
  // One round's message out, and the same round's message in.
  absl::Status SendRound();
  absl::Status ReceiveRound();
  absl::StatusOr<std::vector<double>> Ping(bool kernel, int iters, int warmup);
  absl::Status Pong(bool kernel, int rounds);

  handoff::UcxWorker& worker_;
  handoff::UcxEndpoint& endpoint_;
  const handoff::UcxEndpoint* watch_;
  uint64_t round_ = 0;  // rounds done, both floors; each message carries its round
  // The kernel's state (used in CUDA builds only).
  [[maybe_unused]] void* stream_ = nullptr;           // cudaStream_t, non-blocking
  [[maybe_unused]] uint64_t* host_ticket_ = nullptr;  // mapped host memory the kernel writes
  [[maybe_unused]] uint64_t* device_ticket_ = nullptr;
  [[maybe_unused]] uint64_t ticket_ = 0;  // the last ticket launched
};

}  // namespace seam::bench

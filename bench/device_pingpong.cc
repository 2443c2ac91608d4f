// The device mode's floors (see device_pingpong.h).
#include "device_pingpong.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "seam/core/status.h"
#include "seam/handoff/handoff_tag.h"

#if defined(SEAM_HAVE_CUDA)
#include "seam/core/cuda_check.h"
#include "ticket_kernel.h"
#endif

namespace seam::bench {
namespace {

// A tag kind of the bench's own, apart from the handoff's (handoff_tag.h),
// so a device link's messages still on the wire never match a floor's.
constexpr uint64_t kFloorTag = uint64_t{0xB} << handoff::kTagKindShift;
constexpr absl::Duration kStepTimeout = absl::Seconds(60);

double MicrosSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PingPongFloors>> PingPongFloors::Create(handoff::UcxWorker& worker,
                                                                       handoff::UcxEndpoint& endpoint,
                                                                       const handoff::UcxEndpoint* watch) {
#if defined(SEAM_HAVE_CUDA)
  std::unique_ptr<PingPongFloors> f(new PingPongFloors(worker, endpoint, watch));
  cudaStream_t stream = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  f->stream_ = stream;
  SEAM_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&f->host_ticket_), sizeof(uint64_t),
                                          cudaHostAllocMapped | cudaHostAllocPortable));
  *f->host_ticket_ = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(reinterpret_cast<void**>(&f->device_ticket_), f->host_ticket_, 0));
  return f;
#else
  (void)worker, (void)endpoint, (void)watch;
  return absl::FailedPreconditionError("the kernel floors need the CUDA path");
#endif
}

PingPongFloors::~PingPongFloors() {
#if defined(SEAM_HAVE_CUDA)
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  if (host_ticket_ != nullptr) cudaFreeHost(host_ticket_);
#endif
}

absl::Status PingPongFloors::KernelHop() {
#if defined(SEAM_HAVE_CUDA)
  const uint64_t ticket = ++ticket_;
  SEAM_CUDA_RETURN_IF_ERROR(LaunchTicketWrite(device_ticket_, ticket, static_cast<cudaStream_t>(stream_)));
  const absl::Time deadline = absl::Now() + kStepTimeout;
  for (uint64_t spins = 0;; ++spins) {
    if (__atomic_load_n(host_ticket_, __ATOMIC_ACQUIRE) == ticket) return absl::OkStatus();
    if (spins % 256 == 255) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
      if (e != cudaSuccess && e != cudaErrorNotReady) return Annotate(SEAM_CUDA_STATUS(e), "ticket kernel");
      if (absl::Now() >= deadline) return absl::DeadlineExceededError("the ticket kernel's ticket did not arrive");
    }
  }
#else
  return absl::FailedPreconditionError("the kernel floors need the CUDA path");
#endif
}

absl::Status PingPongFloors::SendRound() {
  const uint64_t round = round_;
  return worker_.Send(endpoint_, kFloorTag, &round, sizeof(round), absl::Now() + kStepTimeout);
}

absl::Status PingPongFloors::ReceiveRound() {
  uint64_t round = 0;
  SEAM_ASSIGN_OR_RETURN(size_t n, worker_.Recv(kFloorTag, handoff::kTagMatchAll, &round, sizeof(round),
                                               absl::Now() + kStepTimeout, watch_));
  if (n != sizeof(round) || round != round_) {
    return absl::InternalError(
        absl::StrCat("floor ping-pong: got round ", round, " (", n, " bytes), expected ", round_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> PingPongFloors::KernelAlone(int iters, int warmup) {
  std::vector<double> us;
  for (int i = 0; i < warmup + iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    SEAM_RETURN_IF_ERROR(KernelHop());
    const double t = MicrosSince(t0);
    if (i >= warmup) us.push_back(t);
  }
  return us;
}

absl::StatusOr<std::vector<double>> PingPongFloors::Ping(bool kernel, int iters, int warmup) {
  std::vector<double> one_way;
  for (int i = 0; i < warmup + iters; ++i, ++round_) {
    const auto t0 = std::chrono::steady_clock::now();
    if (kernel) SEAM_RETURN_IF_ERROR(KernelHop());
    SEAM_RETURN_IF_ERROR(SendRound());
    SEAM_RETURN_IF_ERROR(ReceiveRound());
    const double t = MicrosSince(t0);
    if (i >= warmup) one_way.push_back(t / 2);
  }
  return one_way;
}

absl::Status PingPongFloors::Pong(bool kernel, int rounds) {
  for (int i = 0; i < rounds; ++i, ++round_) {
    SEAM_RETURN_IF_ERROR(ReceiveRound());
    if (kernel) SEAM_RETURN_IF_ERROR(KernelHop());
    SEAM_RETURN_IF_ERROR(SendRound());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> PingPongFloors::PingUcx(int iters, int warmup) {
  return Ping(/*kernel=*/false, iters, warmup);
}
absl::StatusOr<std::vector<double>> PingPongFloors::PingKernel(int iters, int warmup) {
  return Ping(/*kernel=*/true, iters, warmup);
}
absl::Status PingPongFloors::PongUcx(int rounds) { return Pong(/*kernel=*/false, rounds); }
absl::Status PingPongFloors::PongKernel(int rounds) { return Pong(/*kernel=*/true, rounds); }

}  // namespace seam::bench

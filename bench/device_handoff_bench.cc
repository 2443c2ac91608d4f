// seam-bench-handoff device: the one-way latency of a pending handoff (bf16
// hidden + residual, [TOKENS, HIDDEN] each) GPU to GPU through a CUDA-IPC
// device link (stage_server/handoff/device_handoff.h), ping-ponged between
// two processes on GPU 0 and GPU 1 (both on GPU 0 with one GPU), against
// baselines of the same run: cudaMemcpyPeerAsync of the same bytes between
// the same GPUs (one copy, synchronised: the floor of the copy), the host
// path (device-to-host copy, UCX, host-to-device copy) between two
// processes, and the floors of device_pingpong.h measured by the link's own
// two processes over its own UCX endpoint right after each size's handoffs
// (UCX ping-pong, kernel alone, kernel ping-pong: what any cross-process
// design with a kernel per side and a message per hop pays).
// Each device interval covers what a stage pays: the producer's copy +
// checksum into its slot (enqueued; the producer's host does not wait for
// it), the header over UCX, the consumer's peer copy + checksum into its
// own tensors after the producer's event, and the consumer's one host wait
// for both sums.
// Where a hop goes, timed by the bench around the library's public calls
// (per round trip, its two hops averaged; medians over round trips, so the
// three need not add up to device_us exactly):
//   send_us   DeviceHandoffSender::Send, call to return: the wait for the
//             slot's release, enqueueing the copy + checksum kernel and the
//             slot's event, sealing and sending the header
//   take_us   the consumer's PayloadSource::Take (the device link's
//             receiver, wrapped by the bench): from a header accepted to
//             its payloads verified (tensor allocation, the wait on the
//             slot's IPC event, the producer's kernel still running, peer
//             copy + checksum kernel, ticket wait, the slot's release
//             reply, checksum comparison)
//   other_us  one-way minus the two: the header's trip over UCX and the
//             receiver's wake-up, HandoffReceiver's header receive, MAC and
//             checks, and the bench's own loop
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "device_pingpong.h"
#include "handoff_bench_common.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/handoff/device_handoff.h"
#include "seam/handoff/handoff.h"

#if defined(SEAM_HAVE_CUDA)
#include "seam/core/cuda_check.h"
#endif

namespace seam::bench {
namespace {

using handoff::DeviceHandoffReceiver;
using handoff::DeviceHandoffSender;
using Tensors = std::vector<std::pair<std::string, Tensor>>;

constexpr char kKey[] = "bench handoff key";
constexpr int kNoGpu = 3;

struct DeviceArgs {
  bool tcp = false;
  std::vector<int64_t> tokens;
  int64_t hidden = 0;
  int iters = 0;
  int warmup = 0;
  std::string json;
};

struct Row {
  int64_t tokens = 0;
  double bytes = 0, device_median = 0, device_p99 = 0, memcpy_median = 0, host_median = 0, host_p99 = 0;
  double send = 0, take = 0, other = 0;                            // where a hop goes (medians, see the top)
  double ucx_pingpong = 0, kernel_alone = 0, kernel_pingpong = 0;  // the floors (medians, device_pingpong.h)
};

// This process's times of one size's timed handoffs, in microseconds.
struct HopTimes {
  std::vector<double> one_way, send, take;
};

using Clock = std::chrono::steady_clock;
double MicrosSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The device link's receiver, timed: what its Take took the last time (-1: none since Reset).
class TimedPayloads final : public handoff::PayloadSource {
 public:
  explicit TimedPayloads(handoff::PayloadSource& inner) : inner_(inner) {}
  absl::StatusOr<std::vector<Tensor>> Take(const v1::StreamState& header, absl::Time deadline) override {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<std::vector<Tensor>> out = inner_.Take(header, deadline);
    last_us_ = MicrosSince(t0);
    return out;
  }
  void Discard(const v1::StreamState& header, absl::Time deadline) override { inner_.Discard(header, deadline); }
  void Reset() { last_us_ = -1; }
  // The last Take's microseconds; INTERNAL when none ran since Reset.
  absl::StatusOr<double> last_us() const {
    if (last_us_ < 0) return absl::InternalError("the handoff came back without the device link's Take");
    return last_us_;
  }

 private:
  handoff::PayloadSource& inner_;
  double last_us_ = -1;
};

int Fail(const char* who, const absl::Status& s) {
  std::fprintf(stderr, "seam-bench-handoff device %s: %s\n", who, s.ToString().c_str());
  return 1;
}

int GpuOf(bool peer) { return peer && CudaDeviceCount() > 1 ? 1 : 0; }

v1::StreamState Header(uint64_t id, int64_t tokens) {
  v1::StreamState h;
  h.set_microbatch_id(id);
  h.set_sequence_number(id);
  h.set_epoch(1);
  h.set_state(v1::StreamState::STATE_PENDING);
  h.set_token_count(static_cast<uint64_t>(tokens));
  return h;
}

handoff::HandoffExpectation Expect(uint64_t id, int64_t tokens, int64_t hidden) {
  handoff::HandoffExpectation e;
  e.microbatch_id = e.sequence_number = id;
  e.epoch = 1;
  e.tensors = {{"r0.hidden", DType::kBF16, {tokens, hidden}}, {"r0.residual", DType::kBF16, {tokens, hidden}}};
  return e;
}

absl::StatusOr<Tensors> Activations(int64_t tokens, int64_t hidden, int gpu) {
  std::vector<float> values(static_cast<size_t>(tokens * hidden));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.5f;
  Tensors out;
  for (const char* name : {"r0.hidden", "r0.residual"}) {
    SEAM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromFloats(values, {tokens, hidden}, DType::kBF16).To(Device::CUDA(gpu)));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

// One side's two links: out to the peer, in from it; both device links
// once each side has answered the other's offer (in a host handoff of id 0);
// `in` takes device payloads through `timed`. `floors` shares the endpoint.
struct Side {
  std::unique_ptr<DeviceHandoffSender> out;
  std::unique_ptr<DeviceHandoffReceiver> device_in;
  std::unique_ptr<TimedPayloads> timed;
  std::unique_ptr<handoff::HandoffReceiver> in;
  std::unique_ptr<PingPongFloors> floors;
};

absl::Status SetUp(handoff::UcxWorker& w, handoff::UcxEndpoint& ep, const DeviceArgs& a, int gpu, bool first,
                   Side& side) {
  int64_t most = 0;
  for (int64_t t : a.tokens) most = std::max(most, t);
  handoff::DeviceLinkOptions o;
  o.devices = {gpu};
  o.slot_bytes = static_cast<uint64_t>(2 * most * a.hidden * 2 + 1024);
  o.key = kKey;
  o.epoch = 1;
  SEAM_ASSIGN_OR_RETURN(side.out, DeviceHandoffSender::Create(w, ep, o));
  SEAM_ASSIGN_OR_RETURN(side.device_in, DeviceHandoffReceiver::Create(w, ep, o));
  handoff::HandoffReceiverOptions r;
  r.key = kKey;
  side.in = std::make_unique<handoff::HandoffReceiver>(w, a.tcp ? &ep : nullptr, r);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  handoff::HandoffSender host(w, ep, handoff::HandoffSenderOptions{kKey, nullptr});
  SEAM_ASSIGN_OR_RETURN(Tensors act, Activations(1, a.hidden, gpu));
  Tensors on_host;
  for (auto& [name, t] : act) on_host.emplace_back(name, t.To(Device::CPU()).value());
  auto offer = [&]() {
    v1::StreamState h = Header(0, 1);
    *h.mutable_device_offer() = side.out->offer();
    return host.Send(h, on_host, deadline);
  };
  auto answer = [&]() -> absl::Status {
    SEAM_ASSIGN_OR_RETURN(handoff::ReceivedHandoff got, side.in->Receive(Expect(0, 1, a.hidden), deadline));
    SEAM_ASSIGN_OR_RETURN(handoff::TransportChoice c, side.device_in->Answer(got.header.device_offer(), deadline));
    if (c.transport != v1::HANDOFF_TRANSPORT_CUDA_IPC) return absl::FailedPreconditionError(c.passed_over);
    side.timed = std::make_unique<TimedPayloads>(*side.device_in);
    side.in->set_device_payloads(side.timed.get());
    return absl::OkStatus();
  };
  SEAM_RETURN_IF_ERROR(first ? offer() : answer());
  SEAM_RETURN_IF_ERROR(first ? answer() : offer());
  while (side.out->answer() == DeviceHandoffSender::Answer::kPending && absl::Now() < deadline) side.out->Poll();
  if (side.out->answer() != DeviceHandoffSender::Answer::kAccepted) {
    return absl::FailedPreconditionError(absl::StrCat("device link declined: ", side.out->answer_reason()));
  }
  SEAM_ASSIGN_OR_RETURN(side.floors, PingPongFloors::Create(w, ep, a.tcp ? &ep : nullptr));
  return absl::OkStatus();
}

// The ping side, per size: times send + the peer's send back (one-way =
// half), this side's Send and Take of each, then the floors.
absl::Status Ping(Side& side, const DeviceArgs& a, int gpu, std::vector<Row>& rows, std::vector<HopTimes>& times) {
  uint64_t id = 1;
  for (int64_t tokens : a.tokens) {
    SEAM_ASSIGN_OR_RETURN(Tensors act, Activations(tokens, a.hidden, gpu));
    HopTimes& t = times.emplace_back();
    for (int i = 0; i < a.warmup + a.iters; ++i, ++id) {
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      const v1::StreamState header = Header(id, tokens);
      const Clock::time_point t0 = Clock::now();
      SEAM_RETURN_IF_ERROR(side.out->Send(header, act, deadline));
      const double send = MicrosSince(t0);
      side.timed->Reset();
      SEAM_ASSIGN_OR_RETURN(handoff::ReceivedHandoff back, side.in->Receive(Expect(id, tokens, a.hidden), deadline));
      const double round_trip = MicrosSince(t0);
      SEAM_ASSIGN_OR_RETURN(const double take, side.timed->last_us());
      if (i < a.warmup) continue;
      t.one_way.push_back(round_trip / 2);
      t.send.push_back(send);
      t.take.push_back(take);
    }
    Row row;
    row.tokens = tokens;
    row.bytes = 2.0 * static_cast<double>(tokens * a.hidden) * 2;
    std::vector<double> one_way = t.one_way;
    row.device_median = Quantile(one_way, 0.5);
    row.device_p99 = Quantile(one_way, 0.99);
    SEAM_ASSIGN_OR_RETURN(std::vector<double> alone, side.floors->KernelAlone(a.iters, a.warmup));
    SEAM_ASSIGN_OR_RETURN(std::vector<double> ucx, side.floors->PingUcx(a.iters, a.warmup));
    SEAM_ASSIGN_OR_RETURN(std::vector<double> kernel, side.floors->PingKernel(a.iters, a.warmup));
    row.kernel_alone = Quantile(alone, 0.5);
    row.ucx_pingpong = Quantile(ucx, 0.5);
    row.kernel_pingpong = Quantile(kernel, 0.5);
    rows.push_back(row);
  }
  return absl::OkStatus();
}

// The peer, per size: sends each handoff back, then answers the floors'
// pings. Appends "SEND_US TAKE_US" of each timed handoff to `times`.
absl::Status Pong(Side& side, const DeviceArgs& a, std::string& times) {
  uint64_t id = 1;
  for (int64_t tokens : a.tokens) {
    for (int i = 0; i < a.warmup + a.iters; ++i, ++id) {
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      side.timed->Reset();
      SEAM_ASSIGN_OR_RETURN(handoff::ReceivedHandoff got, side.in->Receive(Expect(id, tokens, a.hidden), deadline));
      SEAM_ASSIGN_OR_RETURN(const double take, side.timed->last_us());
      Tensors back = {{"r0.hidden", got.tensors[0]}, {"r0.residual", got.tensors[1]}};
      const v1::StreamState header = Header(id, tokens);
      const Clock::time_point t0 = Clock::now();
      SEAM_RETURN_IF_ERROR(side.out->Send(header, back, deadline));
      const double send = MicrosSince(t0);
      if (i >= a.warmup) absl::StrAppend(&times, absl::StrFormat("%.3f %.3f\n", send, take));
    }
    SEAM_RETURN_IF_ERROR(side.floors->PongUcx(a.warmup + a.iters));
    SEAM_RETURN_IF_ERROR(side.floors->PongKernel(a.warmup + a.iters));
  }
  return absl::OkStatus();
}

// Fills each row's send / take / other (see the top) from this side's times
// and the peer's ("SEND_US TAKE_US" per timed handoff, sizes in order).
absl::Status Breakdown(const std::string& peer, const std::vector<HopTimes>& times, std::vector<Row>& rows) {
  std::vector<std::pair<double, double>> theirs;
  for (absl::string_view line : absl::StrSplit(peer, '\n', absl::SkipEmpty())) {
    std::pair<double, double> p;
    if (std::sscanf(std::string(line).c_str(), "%lf %lf", &p.first, &p.second) != 2) {
      return absl::InternalError(absl::StrCat("the peer's times: bad line '", line, "'"));
    }
    theirs.push_back(p);
  }
  size_t k = 0;
  for (size_t s = 0; s < rows.size(); ++s) {
    const HopTimes& t = times[s];
    std::vector<double> send, take, other;
    for (size_t i = 0; i < t.one_way.size(); ++i, ++k) {
      if (k >= theirs.size()) return absl::InternalError("the peer's times: fewer handoffs than this side's");
      send.push_back((t.send[i] + theirs[k].first) / 2);
      take.push_back((t.take[i] + theirs[k].second) / 2);
      other.push_back(t.one_way[i] - send.back() - take.back());
    }
    rows[s].send = Quantile(send, 0.5);
    rows[s].take = Quantile(take, 0.5);
    rows[s].other = Quantile(other, 0.5);
  }
  if (k != theirs.size()) return absl::InternalError("the peer's times: more handoffs than this side's");
  return absl::OkStatus();
}

// cudaMemcpyPeerAsync of `bytes` from GPU `from` to GPU `to`, synchronised: the median in microseconds.
absl::StatusOr<double> MemcpyPeerMicros(int from, int to, size_t bytes, int iters, int warmup) {
#if defined(SEAM_HAVE_CUDA)
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(to));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&dst, bytes));
  SEAM_CUDA_RETURN_IF_ERROR(cudaSetDevice(from));
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&src, bytes));
  SEAM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (from != to) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e != cudaErrorPeerAccessAlreadyEnabled) SEAM_CUDA_RETURN_IF_ERROR(e);
    cudaGetLastError();
  }
  std::vector<double> times;
  for (int i = 0; i < warmup + iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpyPeerAsync(dst, to, src, from, bytes, stream));
    SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup) times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  cudaStreamDestroy(stream);
  cudaFree(src);
  cudaSetDevice(to);
  cudaFree(dst);
  cudaSetDevice(from);
  return Quantile(times, 0.5);
#else
  return absl::FailedPreconditionError("this build has no CUDA path");
#endif
}

bool Parse(int argc, char** argv, DeviceArgs& a) {
  if (argc != 7 && argc != 8) return false;
  const std::string mode = argv[2];
  if (mode != "tcp" && mode != "shm") return false;
  a.tcp = mode == "tcp";
  for (absl::string_view t : absl::StrSplit(argv[3], ',')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(t, &n) || n <= 0) return false;
    a.tokens.push_back(n);
  }
  a.hidden = std::strtoll(argv[4], nullptr, 10);
  a.iters = std::atoi(argv[5]);
  a.warmup = std::atoi(argv[6]);
  if (argc == 8) a.json = argv[7];
  return a.hidden > 0 && a.hidden % 8 == 0 && a.iters > 0 && a.warmup >= 0;
}

void Report(const DeviceArgs& a, const std::vector<Row>& rows, int from, int to) {
  std::printf("device handoff one-way latency, GPU %d -> GPU %d, bf16 hidden + residual [tokens, %lld], UCX %s\n",
              from, to, static_cast<long long>(a.hidden), a.tcp ? "tcp" : "shm");
  std::printf("%7s %10s %12s %10s %14s %12s %10s %10s\n", "tokens", "bytes", "device_us", "p99_us",
              "memcpy_peer_us", "host_ucx_us", "p99_us", "vs_memcpy");
  for (const Row& r : rows) {
    const double ratio = r.memcpy_median > 0 ? r.device_median / r.memcpy_median : 0;
    std::printf("%7lld %10.0f %12.2f %10.2f %14.2f %12.2f %10.2f %9.2fx\n", static_cast<long long>(r.tokens),
                r.bytes, r.device_median, r.device_p99, r.memcpy_median, r.host_median, r.host_p99, ratio);
  }
  std::printf("where a device hop goes (send: DeviceHandoffSender::Send; take: the receiver's device Take;\n"
              "other: the rest, the header over UCX and its checks) and the floors of the same processes and\n"
              "endpoint (UCX ping-pong: a message per hop; kernel alone: one launch + mapped-ticket wait; kernel\n"
              "ping-pong: a kernel + its wait, then a message, per hop), medians in microseconds\n");
  std::printf("%7s %12s %10s %10s %10s %16s %16s %19s\n", "tokens", "device_us", "send_us", "take_us", "other_us",
              "ucx_pingpong_us", "kernel_alone_us", "kernel_pingpong_us");
  std::string json = absl::StrCat("{\"from_gpu\": ", from, ", \"to_gpu\": ", to, ", \"hidden\": ", a.hidden,
                                  ", \"ucx\": \"", a.tcp ? "tcp" : "shm", "\", \"rows\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%7lld %12.2f %10.2f %10.2f %10.2f %16.2f %16.2f %19.2f\n", static_cast<long long>(r.tokens),
                r.device_median, r.send, r.take, r.other, r.ucx_pingpong, r.kernel_alone, r.kernel_pingpong);
    absl::StrAppend(&json, i ? ", " : "", "{\"tokens\": ", r.tokens, ", \"bytes\": ", static_cast<int64_t>(r.bytes),
                    ", \"device_median_us\": ", r.device_median, ", \"device_p99_us\": ", r.device_p99,
                    ", \"memcpy_peer_median_us\": ", r.memcpy_median, ", \"host_ucx_median_us\": ", r.host_median,
                    ", \"host_ucx_p99_us\": ", r.host_p99, ", \"send_median_us\": ", r.send,
                    ", \"take_median_us\": ", r.take, ", \"other_median_us\": ", r.other);
    absl::StrAppend(&json, ", \"ucx_pingpong_median_us\": ", r.ucx_pingpong, ", \"kernel_alone_median_us\": ",
                    r.kernel_alone, ", \"kernel_pingpong_median_us\": ", r.kernel_pingpong, "}");
  }
  absl::StrAppend(&json, "]}\n");
  std::printf("%s", json.c_str());
  if (!a.json.empty()) {
    if (FILE* f = std::fopen(a.json.c_str(), "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
}

// Runs `body` in a forked child (so this process never holds a CUDA context
// and may fork again) and returns the text it wrote, or nothing when it failed.
std::optional<std::string> InChild(const std::function<int(FILE*)>& body) {
  FILE* f = std::tmpfile();
  if (f == nullptr) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    const int rc = body(f);
    std::fflush(f);
    _exit(rc);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0) {
  }
  std::string text;
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::rewind(f);
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  }
  std::fclose(f);
  if (pid <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return text;
}

// The device link, the floors and the memcpy floor, in one process (and its
// peer, which sends its Send / Take times back over the pipe at the end).
int MeasureDevice(const DeviceArgs& a, FILE* out) {
  signal(SIGPIPE, SIG_IGN);  // a peer that exited early shows up as a failed write
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 1;
  const pid_t pid = fork();  // before any CUDA or UCX state exists in this process
  if (pid < 0) return 1;
  if (pid == 0) {
    close(to_child[1]);
    close(to_parent[0]);
    if (CudaDeviceCount() < 1) _exit(kNoGpu);
    const int gpu = GpuOf(/*peer=*/true);
    std::unique_ptr<handoff::UcxWorker> w;
    handoff::UcxEndpoint ep;
    if (!UseDevice(Device::CUDA(gpu)).ok() || !ConnectOverPipes(a.tcp, to_child[0], to_parent[1], w, ep)) _exit(1);
    Side side;
    std::string times;
    absl::Status s = SetUp(*w, ep, a, gpu, /*first=*/false, side);
    if (s.ok()) s = Pong(side, a, times);
    if (!s.ok()) _exit(Fail("peer", s));
    if (!WritePipeMessage(to_parent[1], times)) _exit(1);
    std::string done;
    (void)ReadPipeMessage(to_child[0], done);  // the last pong has arrived; closing now cannot strand it
    _exit(0);
  }
  close(to_child[0]);
  close(to_parent[1]);
  int rc = 0;
  std::vector<Row> rows;
  std::unique_ptr<handoff::UcxWorker> w;
  handoff::UcxEndpoint ep;
  const int gpu = GpuOf(false);
  {
    Side side;
    std::vector<HopTimes> times;
    if (CudaDeviceCount() < 1) rc = Fail("ping", absl::FailedPreconditionError("no GPU is visible"));
    if (rc == 0 && !(UseDevice(Device::CUDA(gpu)).ok() && ConnectOverPipes(a.tcp, to_parent[0], to_child[1], w, ep))) {
      rc = 1;
    }
    absl::Status s = rc == 0 ? SetUp(*w, ep, a, gpu, /*first=*/true, side) : absl::OkStatus();
    if (rc == 0 && s.ok()) s = Ping(side, a, gpu, rows, times);
    std::string peer;
    if (rc == 0 && s.ok() && !ReadPipeMessage(to_parent[0], peer)) s = absl::InternalError("no times from the peer");
    if (rc == 0 && s.ok()) s = Breakdown(peer, times, rows);
    if (rc == 0 && !s.ok()) rc = Fail("ping", s);
    if (rc == 0) {
      (void)WritePipeMessage(to_child[1], "done");
    } else {
      kill(pid, SIGKILL);  // a peer left waiting would only sit out its deadline
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  for (Row& r : rows) {  // the floor: the same bytes between the same GPUs
    absl::StatusOr<double> floor = MemcpyPeerMicros(gpu, GpuOf(true), static_cast<size_t>(r.bytes), a.iters, a.warmup);
    if (!floor.ok()) return Fail("memcpy peer", floor.status());
    std::fprintf(out, "%lld %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", static_cast<long long>(r.tokens),
                 r.device_median, r.device_p99, *floor, r.send, r.take, r.other, r.ucx_pingpong, r.kernel_alone,
                 r.kernel_pingpong);
  }
  std::fprintf(out, "gpus %d %d\n", gpu, GpuOf(true));
  return 0;
}

}  // namespace

int RunDeviceMode(int argc, char** argv) {
  DeviceArgs a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr, "usage: seam-bench-handoff device tcp|shm TOKENS[,TOKENS...] HIDDEN ITERS WARMUP [JSON_FILE]\n");
    return 2;
  }
  const std::optional<std::string> device = InChild([&](FILE* out) { return MeasureDevice(a, out); });
  if (!device.has_value()) return Fail("device link", absl::InternalError("the measurement failed (see above)"));
  std::vector<Row> rows;
  int from = 0, to = 0;
  for (absl::string_view line : absl::StrSplit(*device, '\n', absl::SkipEmpty())) {
    Row r;
    long long tokens = 0;
    if (std::sscanf(std::string(line).c_str(), "gpus %d %d", &from, &to) == 2) continue;
    if (std::sscanf(std::string(line).c_str(), "%lld %lf %lf %lf %lf %lf %lf %lf %lf %lf", &tokens,
                    &r.device_median, &r.device_p99, &r.memcpy_median, &r.send, &r.take, &r.other, &r.ucx_pingpong,
                    &r.kernel_alone, &r.kernel_pingpong) != 10) {
      continue;
    }
    r.tokens = tokens;
    r.bytes = 2.0 * static_cast<double>(r.tokens * a.hidden) * 2;
    rows.push_back(r);
  }
  for (Row& r : rows) {  // the host path, GPU to GPU through host memory over UCX
    const std::optional<std::string> host = InChild([&](FILE* out) {
      double m = 0, p = 0;
      const int rc = HostHandoffLatency(a.tcp, /*cuda=*/true, r.tokens, a.hidden, a.iters, a.warmup, &m, &p);
      std::fprintf(out, "%.3f %.3f\n", m, p);
      return rc;
    });
    if (!host.has_value() || std::sscanf(host->c_str(), "%lf %lf", &r.host_median, &r.host_p99) != 2) {
      return Fail("host path", absl::InternalError("the measurement failed (see above)"));
    }
  }
  Report(a, rows, from, to);
  return 0;
}

}  // namespace seam::bench

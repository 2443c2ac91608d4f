// seam-bench-handoff: one measurement of seam's stage-to-stage data plane
// between two processes (this one and a forked peer), printed on stdout:
// the sender's bandwidth in MiB/s, or (latency mode) the median and p99
// one-way latency in microseconds of a stage handoff ping-ponged between
// them. Run by `seam bench pipeline`; see bench/README.md.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/handoff/crc32c.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/handoff/ucx_worker.h"
#include "handoff_bench_common.h"
#include "src/payload_mac.h"  // the keyed payloads' MAC, measured beside CRC-32C

namespace {

using seam::handoff::UcxEndpoint;
using seam::handoff::UcxErrorMode;
using seam::handoff::UcxWorker;

constexpr uint64_t kRawTag = 0x5;
constexpr uint64_t kAckTag = 0x7;

struct Args {
  bool tcp = true;      // tcp: PEER mode over TCP on lo; shm: NONE mode, UCX's shared-memory choice
  bool handoff = true;  // handoff: StreamState header + one tensor with CRC-32C; raw: one tagged send
  size_t size = 0;
  int iters = 0;
  int warmup = 0;
};

// Latency mode: a pending stage's handoff, [tokens, hidden] bf16 hidden and
// residual, on the host or (cuda) on GPU 0 and, when there is one, GPU 1 for the peer.
struct LatencyArgs {
  bool tcp = true;
  bool cuda = false;
  int64_t tokens = 0;
  int64_t hidden = 0;
  int iters = 0;
  int warmup = 0;
  bool keyed = false;  // headers and payloads authenticated under a key, as stages send them
};

// The key of a keyed latency run (a stage's is 32 random bytes from the coordinator).
constexpr char kBenchKey[] = "seam-bench-handoff epoch key 32B";

// How long one pipe message or one handoff round may take.
constexpr absl::Duration kStepTimeout = absl::Seconds(60);

// Length-prefixed strings over a pipe, to swap worker addresses. Reads give
// up at `deadline` or when the peer's end closes.
bool WriteMsg(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return write(fd, &n, 4) == 4 && write(fd, s.data(), n) == static_cast<ssize_t>(n);
}
bool ReadAll(int fd, void* p, size_t n, absl::Time deadline) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (poll(&pfd, 1, static_cast<int>(std::min<int64_t>(ms, 1000))) <= 0) {
      if (absl::Now() >= deadline) return false;
      continue;
    }
    const ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool ReadMsg(int fd, std::string& s) {
  const absl::Time deadline = absl::Now() + kStepTimeout;
  uint32_t n = 0;
  if (!ReadAll(fd, &n, 4, deadline)) return false;
  s.resize(n);
  return ReadAll(fd, s.data(), n, deadline);
}

seam::handoff::UcxWorkerOptions Options(bool tcp) {
  seam::handoff::UcxWorkerOptions o;
  o.error_mode = tcp ? UcxErrorMode::kPeer : UcxErrorMode::kNone;
  if (tcp) o.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};  // as seam-stage --ucx-mode tcp
  return o;
}

seam::v1::StreamState Header(uint64_t microbatch) {
  seam::v1::StreamState h;
  h.set_microbatch_id(microbatch);
  h.set_sequence_number(microbatch);
  h.set_epoch(1);
  h.set_state(seam::v1::StreamState::STATE_WRITTEN);
  h.mutable_owed()->set_sum_group(seam::v1::SUM_GROUP_NONE);
  h.set_token_count(1);
  return h;
}

int Fail(const char* who, const absl::Status& s) {
  std::fprintf(stderr, "seam-bench-handoff %s: %s\n", who, s.ToString().c_str());
  return 1;
}

// Receives `count` messages starting at microbatch `first`, then acknowledges.
int ReceiveSome(const Args& a, UcxWorker& w, UcxEndpoint& ep, uint64_t first, int count, std::vector<char>& buf) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  const UcxEndpoint* watch = a.tcp ? &ep : nullptr;
  seam::handoff::HandoffReceiver receiver(w, watch);
  for (int i = 0; i < count; ++i) {
    if (a.handoff) {
      seam::handoff::HandoffExpectation e;
      e.microbatch_id = e.sequence_number = first + i;
      e.epoch = 1;
      e.tensors = {{"hidden", seam::DType::kF32, {static_cast<int64_t>(a.size / 4)}}};
      auto got = receiver.Receive(e, deadline);
      if (!got.ok()) return Fail("receiver", got.status());
    } else {
      auto got = w.Recv(kRawTag, seam::handoff::kTagMatchAll, buf.data(), buf.size(), deadline, watch);
      if (!got.ok()) return Fail("receiver", got.status());
    }
  }
  char ack = 1;
  absl::Status s = w.Send(ep, kAckTag, &ack, 1, deadline);
  return s.ok() ? 0 : Fail("receiver ack", s);
}

int SendSome(const Args& a, UcxWorker& w, UcxEndpoint& ep, uint64_t first, int count, const seam::Tensor& t) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  seam::handoff::HandoffSender sender(w, ep);
  const std::vector<std::pair<std::string, seam::Tensor>> tensors = {{"hidden", t}};
  for (int i = 0; i < count; ++i) {
    absl::Status s = a.handoff ? sender.Send(Header(first + i), tensors, deadline)
                               : w.Send(ep, kRawTag, t.raw_data(), t.nbytes(), deadline);
    if (!s.ok()) return Fail("sender", s);
  }
  char ack = 0;
  auto got = w.Recv(kAckTag, seam::handoff::kTagMatchAll, &ack, 1, deadline, a.tcp ? &ep : nullptr);
  return got.ok() ? 0 : Fail("sender ack", got.status());
}

bool Connect(bool tcp, int rfd, int wfd, std::unique_ptr<UcxWorker>& w, UcxEndpoint& ep) {
  return seam::bench::ConnectOverPipes(tcp, rfd, wfd, w, ep);
}

}  // namespace

// Creates a worker, swaps addresses over the pipes and connects.
bool seam::bench::ConnectOverPipes(bool tcp, int rfd, int wfd, std::unique_ptr<UcxWorker>& w, UcxEndpoint& ep) {
  auto worker = UcxWorker::Create(Options(tcp));
  if (!worker.ok()) return Fail("worker", worker.status()), false;
  w = *std::move(worker);
  std::string peer;
  if (!WriteMsg(wfd, w->Address()) || !ReadMsg(rfd, peer)) return false;
  auto endpoint = w->Connect(peer);
  if (!endpoint.ok()) return Fail("connect", endpoint.status()), false;
  ep = *std::move(endpoint);
  return true;
}

bool seam::bench::WritePipeMessage(int fd, const std::string& s) { return WriteMsg(fd, s); }
bool seam::bench::ReadPipeMessage(int fd, std::string& s) { return ReadMsg(fd, s); }

namespace {

// --- latency mode ---

constexpr int kNoCudaExit = 3;  // the peer found no GPU; the parent reports it

// The header a pending stage 0 of layers [0, 1) sends (as FrameHandoff).
seam::v1::StreamState PendingHeader(uint64_t microbatch, int64_t tokens) {
  seam::v1::StreamState h = Header(microbatch);
  h.set_state(seam::v1::StreamState::STATE_PENDING);
  h.mutable_owed()->set_row_movement(seam::v1::ROW_MOVEMENT_NONE);
  h.mutable_owed()->set_residual_update_owed(true);
  seam::v1::ProducerFacts* p = h.mutable_producer();
  p->set_stage_index(0);
  p->set_first_layer(0);
  p->set_last_layer(0);
  p->set_tp_size(1);
  p->set_attn_dp_size(1);
  p->set_exit_policy("bench:dp_rows");
  h.set_token_count(static_cast<uint64_t>(tokens));
  h.add_attn_dp_row_counts(static_cast<uint64_t>(tokens));
  return h;
}

seam::handoff::HandoffExpectation PendingExpectation(uint64_t microbatch, const LatencyArgs& a) {
  seam::handoff::HandoffExpectation e;
  e.microbatch_id = e.sequence_number = microbatch;
  e.epoch = 1;
  e.tensors = {{"r0.hidden", seam::DType::kBF16, {a.tokens, a.hidden}},
               {"r0.residual", seam::DType::kBF16, {a.tokens, a.hidden}}};
  return e;
}

// Sends hidden and residual, first copied to the host when they live on the
// GPU (handoffs are host-staged: UCX 1.13 as packaged is not CUDA-aware).
absl::Status SendPending(seam::handoff::HandoffSender& sender, const seam::v1::StreamState& header,
                         const std::vector<seam::Tensor>& act, absl::Time deadline) {
  std::vector<std::pair<std::string, seam::Tensor>> host;
  SEAM_ASSIGN_OR_RETURN(seam::Tensor hidden, act[0].On(seam::Device::CPU()));
  SEAM_ASSIGN_OR_RETURN(seam::Tensor residual, act[1].On(seam::Device::CPU()));
  host.emplace_back("r0.hidden", std::move(hidden));
  host.emplace_back("r0.residual", std::move(residual));
  return sender.Send(header, host, deadline);
}

// Receives hidden and residual and moves them to `device` (a no-op on the host).
absl::StatusOr<std::vector<seam::Tensor>> ReceivePending(seam::handoff::HandoffReceiver& receiver,
                                                         const seam::handoff::HandoffExpectation& e,
                                                         seam::Device device, absl::Time deadline) {
  SEAM_ASSIGN_OR_RETURN(seam::handoff::ReceivedHandoff got, receiver.Receive(e, deadline));
  std::vector<seam::Tensor> act;
  for (const seam::Tensor& t : got.tensors) {
    SEAM_ASSIGN_OR_RETURN(seam::Tensor moved, t.On(device));
    act.push_back(std::move(moved));
  }
  return act;
}

// The GPU of one side: the pinging side on GPU 0, its peer on GPU 1 when
// there is one (as pipeline stage 1 would be), else on GPU 0 as well.
seam::Device GpuOf(bool peer) { return seam::Device::CUDA(peer && seam::CudaDeviceCount() > 1 ? 1 : 0); }

// Makes this side's GPU the process's device; called after the fork, in each process.
absl::Status UseGpu(bool peer) {
  if (seam::CudaDeviceCount() < 1) {
    return absl::FailedPreconditionError(
        "cuda: no CUDA device is visible to this process (or this build has no CUDA path); run without 'cuda' "
        "or on a GPU host");
  }
  return seam::UseDevice(GpuOf(peer));
}

// The peer: receives each ping and sends the same activations back.
int Pong(const LatencyArgs& a, UcxWorker& w, UcxEndpoint& ep) {
  const seam::Device device = a.cuda ? GpuOf(/*peer=*/true) : seam::Device::CPU();
  seam::handoff::HandoffSenderOptions send;
  if (a.keyed) send.key = kBenchKey;
  seam::handoff::HandoffSender sender(w, ep, send);
  seam::handoff::HandoffReceiverOptions receive;
  if (a.keyed) receive.key = kBenchKey;
  receive.page_locked = a.cuda;  // as a GPU stage receives
  seam::handoff::HandoffReceiver receiver(w, a.tcp ? &ep : nullptr, receive);
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    const absl::Time deadline = absl::Now() + kStepTimeout;
    auto act = ReceivePending(receiver, PendingExpectation(i, a), device, deadline);
    if (!act.ok()) return Fail("peer receive", act.status());
    if (absl::Status s = SendPending(sender, PendingHeader(i, a.tokens), *act, deadline); !s.ok()) {
      return Fail("peer send", s);
    }
  }
  return 0;
}

// Times WARMUP + ITERS round trips; fills `one_way_us` with round trip / 2 of
// the last ITERS. Each interval covers the device-to-host copies, the send,
// the peer's receive + send, this side's receive and the host-to-device copies.
int Ping(const LatencyArgs& a, UcxWorker& w, UcxEndpoint& ep, std::vector<double>& one_way_us) {
  const seam::Device device = a.cuda ? GpuOf(/*peer=*/false) : seam::Device::CPU();
  std::vector<float> values(static_cast<size_t>(a.tokens * a.hidden));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.5f;
  std::vector<seam::Tensor> act;
  for (int k = 0; k < 2; ++k) {
    auto t = seam::Tensor::FromFloats(values, {a.tokens, a.hidden}, seam::DType::kBF16).On(device);
    if (!t.ok()) return Fail("tensors", t.status());
    act.push_back(*std::move(t));
  }
  seam::handoff::HandoffSenderOptions send;
  if (a.keyed) send.key = kBenchKey;
  seam::handoff::HandoffSender sender(w, ep, send);
  seam::handoff::HandoffReceiverOptions receive;
  if (a.keyed) receive.key = kBenchKey;
  receive.page_locked = a.cuda;  // as a GPU stage receives
  seam::handoff::HandoffReceiver receiver(w, a.tcp ? &ep : nullptr, receive);
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    const seam::v1::StreamState header = PendingHeader(i, a.tokens);
    const seam::handoff::HandoffExpectation expect = PendingExpectation(i, a);
    const absl::Time deadline = absl::Now() + kStepTimeout;
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = SendPending(sender, header, act, deadline); !s.ok()) return Fail("send", s);
    auto back = ReceivePending(receiver, expect, device, deadline);
    const auto t1 = std::chrono::steady_clock::now();
    if (!back.ok()) return Fail("receive", back.status());
    act = *std::move(back);
    if (i >= a.warmup) one_way_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  return 0;
}

using seam::bench::Quantile;

// Measures; fills the median and p99 when given, else prints them.
int RunLatency(const LatencyArgs& a, double* median_out = nullptr, double* p99_out = nullptr) {
  signal(SIGPIPE, SIG_IGN);  // a peer that exited early shows up as a failed write, not a killed process
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 1;
  const pid_t pid = fork();  // before any UCX or CUDA state exists in this process
  if (pid < 0) return 1;
  if (pid == 0) {
    close(to_child[1]);
    close(to_parent[0]);
    if (a.cuda && seam::CudaDeviceCount() < 1) _exit(kNoCudaExit);
    if (a.cuda) {
      if (absl::Status s = UseGpu(/*peer=*/true); !s.ok()) _exit(Fail("peer", s));
    }
    std::unique_ptr<UcxWorker> w;
    UcxEndpoint ep;
    if (!Connect(a.tcp, to_child[0], to_parent[1], w, ep)) _exit(1);
    const int rc = Pong(a, *w, ep);
    std::string done;
    (void)ReadMsg(to_child[0], done);  // the last pong has arrived; closing now cannot strand it
    _exit(rc);
  }
  close(to_child[0]);
  close(to_parent[1]);
  int rc = 0;
  if (a.cuda) {
    if (absl::Status s = UseGpu(/*peer=*/false); !s.ok()) rc = Fail("latency", s);
  }
  std::unique_ptr<UcxWorker> w;
  UcxEndpoint ep;
  std::vector<double> one_way_us;
  if (rc == 0) rc = Connect(a.tcp, to_parent[0], to_child[1], w, ep) ? 0 : 1;
  if (rc == 0) rc = Ping(a, *w, ep, one_way_us);
  if (rc == 0) {
    (void)WriteMsg(to_child[1], "done");
  } else {
    kill(pid, SIGKILL);  // a peer left waiting would only sit out its deadline
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  const double median = Quantile(one_way_us, 0.5), p99 = Quantile(one_way_us, 0.99);
  if (median_out != nullptr) {
    *median_out = median;
    *p99_out = p99;
    return 0;
  }
  std::printf("%.2f %.2f\n", median, p99);
  // The least round is the path's cost on cores not shared (stdout keeps its two numbers).
  std::fprintf(stderr, "seam-bench-handoff: least one-way %.2f us of %zu rounds\n",
               *std::min_element(one_way_us.begin(), one_way_us.end()), one_way_us.size());
  return 0;
}

bool ParseLatencyArgs(int argc, char** argv, LatencyArgs& a) {
  if (argc < 7 || argc > 9) return false;
  const std::string mode = argv[2], device = argc >= 8 ? argv[7] : "cpu", key = argc == 9 ? argv[8] : "keyless";
  if ((mode != "tcp" && mode != "shm") || (device != "cpu" && device != "cuda")) return false;
  if (key != "keyed" && key != "keyless") return false;
  a.keyed = key == "keyed";
  a.tcp = mode == "tcp";
  a.cuda = device == "cuda";
  a.tokens = std::strtoll(argv[3], nullptr, 10);
  a.hidden = std::strtoll(argv[4], nullptr, 10);
  a.iters = std::atoi(argv[5]);
  a.warmup = std::atoi(argv[6]);
  return a.tokens > 0 && a.hidden > 0 && a.tokens * a.hidden <= (int64_t{1} << 30) && a.iters > 0 && a.warmup >= 0;
}

bool ParseArgs(int argc, char** argv, Args& a) {
  if (argc != 6) return false;
  const std::string mode = argv[1], kind = argv[2];
  if ((mode != "tcp" && mode != "shm") || (kind != "handoff" && kind != "raw")) return false;
  a.tcp = mode == "tcp";
  a.handoff = kind == "handoff";
  a.size = std::strtoull(argv[3], nullptr, 10);
  a.iters = std::atoi(argv[4]);
  a.warmup = std::atoi(argv[5]);
  return a.size >= 4 && a.size % 4 == 0 && a.iters > 0 && a.warmup >= 0;
}

}  // namespace

double seam::bench::Quantile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

int seam::bench::HostHandoffLatency(bool tcp, bool cuda, int64_t tokens, int64_t hidden, int iters, int warmup,
                                    double* median, double* p99) {
  LatencyArgs a;
  a.tcp = tcp;
  a.cuda = cuda;
  a.tokens = tokens;
  a.hidden = hidden;
  a.iters = iters;
  a.warmup = warmup;
  return RunLatency(a, median, p99);
}

// Protect mode: the CPU a payload's protection costs in this process, per
// payload of BYTES: CRC-32C (keyless handoffs, and main's keyed ones)
// against Poly1305 with its one-time key (keyed ones), the least of 30 short
// rounds of ITERS each (the least is the cost on a core not shared).
int RunProtect(int argc, char** argv) {
  if (argc != 4) return 2;
  const size_t bytes = std::strtoull(argv[2], nullptr, 10);
  const int iters = std::atoi(argv[3]);
  if (bytes == 0 || iters <= 0) return 2;
  std::vector<char> payload(bytes);
  for (size_t i = 0; i < bytes; ++i) payload[i] = static_cast<char>(i * 131);
  auto mac = seam::handoff::PayloadMac::Create(kBenchKey);
  auto nonce = seam::handoff::PayloadMac::NewNonce();
  if (!mac.ok() || !nonce.ok()) return 1;
  auto least = [&](const std::function<void()>& one) {
    double best = 1e300;
    for (int round = 0; round < 30; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) one();
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    return best;
  };
  uint32_t sink = 0;
  const double crc = least([&] { sink ^= seam::handoff::Crc32c(payload.data(), bytes); });
  const double poly = least([&] { sink ^= static_cast<uint32_t>((*mac).Tag(*nonce, 1, payload.data(), bytes)->size()); });
  std::printf("bytes=%zu crc32c_us=%.2f (%.1f GB/s) poly1305_us=%.2f (%.1f GB/s) ratio=%.2f [%u]\n", bytes, crc,
              bytes / crc / 1e3, poly, bytes / poly / 1e3, poly / crc, sink & 1);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "device") return seam::bench::RunDeviceMode(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "protect") return RunProtect(argc, argv);
  Args a;
  LatencyArgs l;
  const bool latency = argc > 1 && std::string(argv[1]) == "latency";
  if (latency ? !ParseLatencyArgs(argc, argv, l) : !ParseArgs(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: seam-bench-handoff tcp|shm handoff|raw BYTES ITERS WARMUP\n"
                 "         prints the sender's bandwidth in MiB/s over ITERS messages after WARMUP\n"
                 "       seam-bench-handoff latency tcp|shm TOKENS HIDDEN ITERS WARMUP [cpu|cuda] [keyed|keyless]\n"
                 "         ping-pongs a pending handoff (bf16 hidden + residual, [TOKENS, HIDDEN] each) and\n"
                 "         prints the median and p99 one-way latency in microseconds over ITERS round trips;\n"
                 "         keyed: headers and payloads authenticated under a key, as stages send them\n"
                 "       seam-bench-handoff protect BYTES ITERS\n"
                 "         the CPU one payload's protection costs: CRC-32C against Poly1305 with its key\n"
                 "       seam-bench-handoff device tcp|shm TOKENS[,TOKENS...] HIDDEN ITERS WARMUP [JSON_FILE]\n"
                 "         the same handoff GPU to GPU through a CUDA-IPC device link, against cudaMemcpyPeer of\n"
                 "         its bytes and the host path, where a hop goes (Send, Take, the rest) and the floors of\n"
                 "         the same processes (UCX ping-pong, kernel alone, kernel ping-pong), as tables (and JSON)\n");
    return 2;
  }
  if (latency) return RunLatency(l);
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 1;
  const pid_t pid = fork();  // before any UCX state exists in this process
  if (pid < 0) return 1;
  if (pid == 0) {
    std::unique_ptr<UcxWorker> w;
    UcxEndpoint ep;
    if (!Connect(a.tcp, to_child[0], to_parent[1], w, ep)) _exit(1);
    std::vector<char> buf(a.size);
    int rc = ReceiveSome(a, *w, ep, 0, a.warmup, buf);
    if (rc == 0) rc = ReceiveSome(a, *w, ep, a.warmup, a.iters, buf);
    std::string done;
    (void)ReadMsg(to_child[0], done);  // the sender has its ack; closing now cannot strand it
    _exit(rc);
  }
  std::unique_ptr<UcxWorker> w;
  UcxEndpoint ep;
  int rc = Connect(a.tcp, to_parent[0], to_child[1], w, ep) ? 0 : 1;
  std::vector<float> values(a.size / 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.5f;
  const seam::Tensor t = seam::Tensor::FromFloats(values, {static_cast<int64_t>(values.size())}, seam::DType::kF32);
  if (rc == 0) rc = SendSome(a, *w, ep, 0, a.warmup, t);
  const auto t0 = std::chrono::steady_clock::now();
  if (rc == 0) rc = SendSome(a, *w, ep, a.warmup, a.iters, t);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  (void)WriteMsg(to_child[1], "done");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  std::printf("%.2f\n", static_cast<double>(a.size) * a.iters / secs / (1024.0 * 1024.0));
  return 0;
}

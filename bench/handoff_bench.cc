// seam-bench-handoff: one bandwidth measurement of seam's stage-to-stage data
// plane between two processes (this one and a forked receiver), printed as
// MiB/s on stdout. Run by `seam bench pipeline`; see bench/README.md.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "seam/handoff/handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/handoff/ucx_worker.h"

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

// Length-prefixed strings over a pipe, to swap worker addresses.
bool WriteMsg(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return write(fd, &n, 4) == 4 && write(fd, s.data(), n) == static_cast<ssize_t>(n);
}
bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool ReadMsg(int fd, std::string& s) {
  uint32_t n = 0;
  if (!ReadAll(fd, &n, 4)) return false;
  s.resize(n);
  return ReadAll(fd, s.data(), n);
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

// Creates a worker, swaps addresses over the pipes and connects.
bool Connect(const Args& a, int rfd, int wfd, std::unique_ptr<UcxWorker>& w, UcxEndpoint& ep) {
  auto worker = UcxWorker::Create(Options(a.tcp));
  if (!worker.ok()) return Fail("worker", worker.status()), false;
  w = *std::move(worker);
  std::string peer;
  if (!WriteMsg(wfd, w->Address()) || !ReadMsg(rfd, peer)) return false;
  auto endpoint = w->Connect(peer);
  if (!endpoint.ok()) return Fail("connect", endpoint.status()), false;
  ep = *std::move(endpoint);
  return true;
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

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, a)) {
    std::fprintf(stderr, "usage: seam-bench-handoff tcp|shm handoff|raw BYTES ITERS WARMUP\n"
                         "prints the sender's bandwidth in MiB/s over ITERS messages after WARMUP\n");
    return 2;
  }
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 1;
  const pid_t pid = fork();  // before any UCX state exists in this process
  if (pid < 0) return 1;
  if (pid == 0) {
    std::unique_ptr<UcxWorker> w;
    UcxEndpoint ep;
    if (!Connect(a, to_child[0], to_parent[1], w, ep)) _exit(1);
    std::vector<char> buf(a.size);
    int rc = ReceiveSome(a, *w, ep, 0, a.warmup, buf);
    if (rc == 0) rc = ReceiveSome(a, *w, ep, a.warmup, a.iters, buf);
    std::string done;
    (void)ReadMsg(to_child[0], done);  // the sender has its ack; closing now cannot strand it
    _exit(rc);
  }
  std::unique_ptr<UcxWorker> w;
  UcxEndpoint ep;
  int rc = Connect(a, to_parent[0], to_child[1], w, ep) ? 0 : 1;
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

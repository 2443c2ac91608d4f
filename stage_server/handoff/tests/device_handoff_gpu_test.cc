// Device handoffs between two real processes on GPUs (skipped without one):
// a producer offers its ring in a host handoff, the consumer accepts, and
// the next handoffs go GPU to GPU, bytes exact, their checksums equal to the
// CPU reference; one GPU shared by both, and two GPUs; a payload corrupted
// after its checksum is refused with DATA_LOSS and the next one arrives.
// Both ends run in child processes (CUDA is never initialised here, so the
// test may fork again); this process only swaps their worker addresses.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/handoff/device_checksum.h"
#include "seam/handoff/device_handoff.h"
#include "tests/peer_process.h"

namespace seam::handoff {
namespace {

using testing::Channel;
using testing::PeerProcess;
using testing::PeerSide;
using Tensors = std::vector<std::pair<std::string, Tensor>>;

constexpr char kKey[] = "epoch 1 handoff key";
constexpr int kDeviceHandoffs = 3;  // after the host handoff that carries the offer; more than the 2 slots

// GPUs a child process sees; this process stays without a CUDA context.
int GpusSeenByAChild() {
  const pid_t pid = fork();
  if (pid == 0) _exit(std::min(CudaDeviceCount(), 100));
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
  return WEXITSTATUS(status);
}

// Microbatch m's tensors on the host: a decode handoff of 8 tokens (hidden
// and residual, bf16 [8, 4096]) and an f32 [3, 5] whose 60 bytes end in a
// partial vector.
Tensors Payload(uint64_t m) {
  std::vector<float> a(8 * 4096), b(8 * 4096), c(15);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7 + m) % 1013) * 0.125f - 60.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 3 + 5 * m) % 389) * 0.5f;
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i + m) * 1.5f;
  return {{"r0.hidden", Tensor::FromFloats(a, {8, 4096}, DType::kBF16)},
          {"r0.residual", Tensor::FromFloats(b, {8, 4096}, DType::kBF16)},
          {"r0.tail", Tensor::FromFloats(c, {3, 5}, DType::kF32)}};
}

v1::StreamState Header(uint64_t m) {
  v1::StreamState h;
  h.set_microbatch_id(m);
  h.set_sequence_number(m);
  h.set_epoch(1);
  h.set_state(v1::StreamState::STATE_PENDING);
  h.set_token_count(8);
  return h;
}

HandoffExpectation Expectation(uint64_t m) {
  HandoffExpectation e;
  e.microbatch_id = e.sequence_number = m;
  e.epoch = 1;
  e.tensors = {{"r0.hidden", DType::kBF16, {8, 4096}}, {"r0.residual", DType::kBF16, {8, 4096}},
               {"r0.tail", DType::kF32, {3, 5}}};
  return e;
}

DeviceLinkOptions LinkOptions(int gpu) {
  DeviceLinkOptions o;
  o.devices = {gpu};
  o.slot_bytes = 1 << 20;
  o.slots = 2;
  o.key = kKey;
  o.epoch = 1;
  return o;
}

int Failed(const char* who, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", who, s.ToString().c_str());
  return 1;
}

// The producer: the offer in microbatch 1's host handoff, then device handoffs.
absl::Status Produce(UcxWorker& worker, UcxEndpoint& endpoint, int gpu, int64_t flip) {
  SEAM_RETURN_IF_ERROR(UseDevice(Device::CUDA(gpu)));
  DeviceLinkOptions options = LinkOptions(gpu);
  options.flip_byte_after_checksum = flip;
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<DeviceHandoffSender> link,
                        DeviceHandoffSender::Create(worker, endpoint, options));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  v1::StreamState first = Header(1);
  *first.mutable_device_offer() = link->offer();
  HandoffSender host(worker, endpoint, HandoffSenderOptions{kKey, nullptr});
  SEAM_RETURN_IF_ERROR(host.Send(first, Payload(1), deadline));
  while (link->answer() == DeviceHandoffSender::Answer::kPending && absl::Now() < deadline) link->Poll();
  if (link->answer() != DeviceHandoffSender::Answer::kAccepted) {
    return absl::FailedPreconditionError(absl::StrCat("device link not accepted: ", link->answer_reason()));
  }
  for (uint64_t m = 2; m < 2 + kDeviceHandoffs; ++m) {
    Tensors on_gpu;
    for (auto& [name, t] : Payload(m)) on_gpu.emplace_back(name, t.To(Device::CUDA(gpu)).value());
    SEAM_RETURN_IF_ERROR(link->Send(Header(m), on_gpu, deadline));
  }
  return absl::OkStatus();
}

// Equal bytes, and the checksum both kernels agreed on equal to the CPU reference's.
absl::Status CheckArrived(const ReceivedHandoff& got, uint64_t m, int gpu, const std::vector<uint64_t>& checksums) {
  const Tensors want = Payload(m);
  std::vector<Tensor> host;
  std::vector<ChecksumSpan> spans;
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& t = got.tensors[i];
    if (t.device() != Device::CUDA(gpu)) return absl::InternalError(absl::StrCat("tensor ", i, " not on the GPU"));
    SEAM_ASSIGN_OR_RETURN(Tensor h, t.To(Device::CPU()));
    if (h.nbytes() != want[i].second.nbytes() || std::memcmp(h.raw_data(), want[i].second.raw_data(), h.nbytes())) {
      return absl::InternalError(absl::StrCat("microbatch ", m, " tensor ", i, ": bytes differ"));
    }
    const v1::TensorDesc& d = got.header.tensors(static_cast<int>(i));
    spans.push_back(ChecksumSpan{h.raw_data(), h.nbytes(), d.offset() / 4});
    host.push_back(std::move(h));
  }
  const v1::DeviceSlot& slot = got.header.device_slot();
  if (checksums.size() != 1 || DeviceChecksum(slot.checksum_seed(), spans) != checksums[0]) {
    return absl::InternalError(absl::StrCat("microbatch ", m, ": kernel checksum differs from the reference"));
  }
  return absl::OkStatus();
}

// The consumer: accepts the offer, then takes the device handoffs.
absl::Status Consume(UcxWorker& worker, UcxEndpoint& endpoint, const UcxEndpoint* watch, int gpu, bool corrupt) {
  SEAM_RETURN_IF_ERROR(UseDevice(Device::CUDA(gpu)));
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<DeviceHandoffReceiver> link,
                        DeviceHandoffReceiver::Create(worker, endpoint, LinkOptions(gpu)));
  HandoffReceiverOptions options;
  options.key = kKey;
  HandoffReceiver receiver(worker, watch, options);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  SEAM_ASSIGN_OR_RETURN(ReceivedHandoff first, receiver.Receive(Expectation(1), deadline));
  if (!first.header.has_device_offer()) return absl::InternalError("microbatch 1 carries no offer");
  SEAM_ASSIGN_OR_RETURN(const TransportChoice choice, link->Answer(first.header.device_offer(), deadline));
  if (choice.transport != v1::HANDOFF_TRANSPORT_CUDA_IPC) {
    return absl::InternalError(absl::StrCat("offer declined: ", choice.passed_over));
  }
  receiver.set_device_payloads(link.get());
  for (uint64_t m = 2; m < 2 + kDeviceHandoffs; ++m) {
    absl::StatusOr<ReceivedHandoff> got = receiver.Receive(Expectation(m), deadline);
    if (corrupt && m == 2) {
      if (!absl::IsDataLoss(got.status()) || got.status().message().find("device checksum") == std::string::npos) {
        return absl::InternalError(absl::StrCat("corrupted microbatch 2 gave ", got.status().ToString()));
      }
      continue;
    }
    if (!got.ok()) return got.status();
    if (got->header.transport() != v1::HANDOFF_TRANSPORT_CUDA_IPC) return absl::InternalError("not a device handoff");
    SEAM_RETURN_IF_ERROR(CheckArrived(*got, m, gpu, link->last_checksums()));
  }
  if (receiver.drops().total() != 0) return absl::InternalError("the receiver dropped messages");
  return absl::OkStatus();
}

// A child: connects (to the address this process relays), runs `body`,
// reports, and progresses until told to go.
std::unique_ptr<PeerProcess> Child(UcxErrorMode mode, const char* who,
                                   std::function<absl::Status(PeerSide&)> body) {
  return std::make_unique<PeerProcess>([=](Channel& channel) {
    PeerSide side;
    if (!testing::ConnectChild(channel, mode, side)) return 2;
    const absl::Status s = body(side);
    if (!s.ok()) Failed(who, s);
    if (!channel.Write(s.ok() ? "ok" : "failed").ok()) return 4;
    const bool done = channel.Read(absl::Seconds(30), [&] { side.worker->Progress(); }).ok();
    return s.ok() && done ? 0 : 3;
  });
}

class DeviceHandoffGpuTest : public ::testing::TestWithParam<UcxErrorMode> {
 protected:
  void Run(int producer_gpu, int consumer_gpu, int64_t flip) {
    const UcxErrorMode mode = GetParam();
    auto producer = Child(mode, "producer", [=](PeerSide& side) {
      return Produce(*side.worker, side.endpoint, producer_gpu, flip);
    });
    auto consumer = Child(mode, "consumer", [=](PeerSide& side) {
      return Consume(*side.worker, side.endpoint, mode == UcxErrorMode::kPeer ? &side.endpoint : nullptr,
                     consumer_gpu, flip >= 0);
    });
    auto a = producer->channel().Read(absl::Seconds(30));
    auto b = consumer->channel().Read(absl::Seconds(30));
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(producer->channel().Write(*b).ok());
    ASSERT_TRUE(consumer->channel().Write(*a).ok());
    EXPECT_EQ(producer->channel().Read(absl::Seconds(60)).value_or("no answer"), "ok");
    EXPECT_EQ(consumer->channel().Read(absl::Seconds(60)).value_or("no answer"), "ok");
    for (PeerProcess* child : {producer.get(), consumer.get()}) {
      ASSERT_TRUE(child->channel().Write("done").ok());
      EXPECT_EQ(child->Wait(absl::Seconds(30)).value_or(-1), 0);
    }
  }
};

TEST_P(DeviceHandoffGpuTest, BytesArriveExactOnOneGpu) {
  if (GpusSeenByAChild() < 1) GTEST_SKIP() << "needs a GPU";
  Run(0, 0, -1);
}

TEST_P(DeviceHandoffGpuTest, BytesArriveExactAcrossTwoGpus) {
  if (GpusSeenByAChild() < 2) GTEST_SKIP() << "needs two GPUs";
  Run(0, 1, -1);
}

TEST_P(DeviceHandoffGpuTest, CorruptedPayloadIsRefusedAndTheNextArrives) {
  const int gpus = GpusSeenByAChild();
  if (gpus < 1) GTEST_SKIP() << "needs a GPU";
  Run(0, gpus > 1 ? 1 : 0, /*flip=*/4096 + 17);
}

INSTANTIATE_TEST_SUITE_P(Modes, DeviceHandoffGpuTest, ::testing::Values(UcxErrorMode::kPeer, UcxErrorMode::kNone),
                         [](const auto& info) { return std::string(testing::ModeName(info.param)); });

}  // namespace
}  // namespace seam::handoff

// NcclCommunicator on real GPUs (one thread per GPU, skipped with fewer than
// two): every collective against the serial reference with integer-valued
// data, stream-ordered calls completed by one Synchronize, collectives
// captured in a CUDA graph and replayed, and the deadlines of a rank that
// never joins and of a peer that stops calling.
#include <cuda_runtime_api.h>

#include <chrono>
#include <optional>
#include <random>

#include "absl/synchronization/notification.h"
#include "comm_test_util.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using testing::RunRanks;
using ::testing::HasSubstr;

Tensor OnGpu(const std::vector<float>& v, const Shape& shape, DType dtype, int device) {
  return Tensor::FromFloats(v, shape, dtype).To(Device::CUDA(device)).value();
}

std::vector<float> OnHost(const Tensor& t) { return t.To(Device::CPU())->ToFloats(); }

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// Rank r of an n-rank group on GPU r, its calls on `stream`.
std::unique_ptr<NcclCommunicator> Join(const std::shared_ptr<Store>& store, int r, int n, void* stream,
                                       absl::Duration timeout = absl::Seconds(30)) {
  NcclOptions options;
  options.comm.timeout = timeout;
  options.device = r;
  options.stream = stream;
  auto comm = MakeNcclCommunicator(store, "tp", r, n, options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

// Integer values in [-k, k], one vector per rank, and their sum.
std::vector<std::vector<float>> SmallIntegers(int n, int64_t count, int k, std::vector<float>* sum) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(-k, k);
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  sum->assign(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) (*sum)[i] += in[r][i] = static_cast<float>(dist(rng));
  }
  return in;
}

std::vector<float> Scaled(std::vector<float> v, float k) {
  for (float& x : v) x *= k;
  return v;
}

TEST(NcclTest, EveryCollectiveMatchesTheSerialReference) {
  const int n = std::min(CudaDeviceCount(), 4);
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::vector<int64_t> counts(n, 2);
  counts[1] = 0;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const int64_t width = 5;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<std::vector<float>> in(n);
  std::vector<float> sum(total * width, 0.0f), gathered;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < total * width; ++i) in[r].push_back(static_cast<float>(dist(rng)));
    for (int64_t i = 0; i < total * width; ++i) sum[i] += in[r][i];
  }
  int64_t offset = 0;
  std::vector<int64_t> offsets;
  for (int r = 0; r < n; ++r) {
    offsets.push_back(offset);
    gathered.insert(gathered.end(), in[r].begin(), in[r].begin() + counts[r] * width);
    offset += counts[r];
  }
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    RunRanks(n, [&](int r) {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      cudaStream_t stream;
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
      NcclOptions options;
      options.comm.timeout = absl::Seconds(30);
      options.device = r;
      options.stream = stream;
      auto comm = MakeNcclCommunicator(MakePrefixStore(DTypeName(dtype), *store), "tp", r, n, options);
      ASSERT_TRUE(comm.ok()) << comm.status();
      Communicator& c = **comm;
      auto synchronize = [&] { return c.Synchronize(In(absl::Seconds(30))).ok(); };

      Tensor all = OnGpu(in[r], {total, width}, dtype, r);
      ASSERT_TRUE(c.AllReduce(all).ok());
      ASSERT_TRUE(synchronize());
      EXPECT_EQ(all.To(Device::CPU())->ToFloats(), sum) << "AllReduce rank " << r;

      Tensor mine = Tensor::TryEmpty({counts[r], width}, dtype, Device::CUDA(r)).value();
      ASSERT_TRUE(c.ReduceScatterV(OnGpu(in[r], {total, width}, dtype, r), counts, mine).ok());
      ASSERT_TRUE(synchronize());
      std::vector<float> expected(sum.begin() + offsets[r] * width, sum.begin() + (offsets[r] + counts[r]) * width);
      EXPECT_EQ(mine.To(Device::CPU())->ToFloats(), expected) << "ReduceScatterV rank " << r;

      Tensor out = Tensor::TryEmpty({total, width}, dtype, Device::CUDA(r)).value();
      std::vector<float> part(in[r].begin(), in[r].begin() + counts[r] * width);
      ASSERT_TRUE(c.AllGatherV(OnGpu(part, {counts[r], width}, dtype, r), counts, out).ok());
      ASSERT_TRUE(synchronize());
      EXPECT_EQ(out.To(Device::CPU())->ToFloats(), gathered) << "AllGatherV rank " << r;

      Tensor b = OnGpu(in[r], {total, width}, dtype, r);
      ASSERT_TRUE(c.Broadcast(b, n - 1).ok());
      ASSERT_TRUE(synchronize());
      EXPECT_EQ(b.To(Device::CPU())->ToFloats(), Tensor::FromFloats(in[n - 1], {total, width}, dtype).ToFloats());
      EXPECT_TRUE(c.Barrier().ok());
      EXPECT_TRUE(synchronize());
      comm->reset();
      cudaStreamDestroy(stream);
    });
  }
}

TEST(NcclTest, StreamOrderedCollectivesGiveTheSumsAfterOneSynchronize) {
  const int n = std::min(CudaDeviceCount(), 4);
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::vector<float> sum;
  const auto in = SmallIntegers(n, 4 * 6, 8, &sum);
  std::vector<int64_t> counts(n, 1);
  counts[0] = 4 - (n - 1);
  RunRanks(n, [&](int r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    auto stream = CudaStream::Create(Device::CUDA(r));
    ASSERT_TRUE(stream.ok()) << stream.status();
    auto comm = Join(*store, r, n, stream->handle());
    ASSERT_NE(comm, nullptr);
    Tensor f = OnGpu(in[r], {4, 6}, DType::kF32, r);
    Tensor h = OnGpu(in[r], {4, 6}, DType::kBF16, r);
    Tensor mine = Tensor::TryEmpty({counts[r], 6}, DType::kBF16, Device::CUDA(r)).value();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads are done before the stream reads them
    // Enqueued back to back: each call reads what the one before wrote.
    ASSERT_TRUE(comm->AllReduce(f).ok());
    ASSERT_TRUE(comm->AllReduce(f).ok());
    ASSERT_TRUE(comm->AllReduce(h).ok());
    ASSERT_TRUE(comm->ReduceScatterV(h, counts, mine).ok());
    absl::Status synced = comm->Synchronize(In(absl::Seconds(30)));
    ASSERT_TRUE(synced.ok()) << synced;
    EXPECT_EQ(OnHost(f), Scaled(sum, n)) << "rank " << r;
    EXPECT_EQ(OnHost(h), sum) << "rank " << r;
    int64_t first = 0;
    for (int q = 0; q < r; ++q) first += counts[q];
    EXPECT_EQ(OnHost(mine), Scaled(std::vector<float>(sum.begin() + first * 6, sum.begin() + (first + counts[r]) * 6),
                                   n))
        << "rank " << r;
    EXPECT_TRUE(comm->Synchronize(absl::InfinitePast()).ok());  // nothing left: OK past the deadline
  });
}

TEST(NcclTest, CollectivesCapturedInAGraphGiveTheSumsOnEveryReplay) {
  const int n = std::min(CudaDeviceCount(), 4);
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::vector<float> sum;
  const auto in = SmallIntegers(n, 2 * 4, 2, &sum);  // n² · sum stays exact in bf16
  RunRanks(n, [&](int r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    auto stream = CudaStream::Create(Device::CUDA(r));
    ASSERT_TRUE(stream.ok()) << stream.status();
    auto comm = Join(*store, r, n, stream->handle());
    ASSERT_NE(comm, nullptr);
    Tensor f = OnGpu(in[r], {2, 4}, DType::kF32, r);
    Tensor h = OnGpu(in[r], {2, 4}, DType::kBF16, r);
    // Warm-up outside the capture: NCCL connects and the bf16 scratch is
    // allocated (the tensors live until the stream has passed them).
    Tensor f0 = OnGpu(std::vector<float>(8, 0.0f), {2, 4}, DType::kF32, r);
    Tensor h0 = OnGpu(std::vector<float>(8, 0.0f), {2, 4}, DType::kBF16, r);
    ASSERT_TRUE(comm->AllReduce(f0).ok());
    ASSERT_TRUE(comm->AllReduce(h0).ok());
    ASSERT_TRUE(comm->Synchronize(In(absl::Seconds(30))).ok());

    absl::Status synced_in_capture;
    auto graph = CudaGraph::Capture(*stream, [&]() -> absl::Status {
      SEAM_RETURN_IF_ERROR(comm->AllReduce(f));
      SEAM_RETURN_IF_ERROR(comm->AllReduce(h));
      synced_in_capture = comm->Synchronize(In(absl::Seconds(30)));
      return absl::OkStatus();
    });
    ASSERT_TRUE(graph.ok()) << graph.status();
    EXPECT_EQ(synced_in_capture.code(), absl::StatusCode::kFailedPrecondition) << synced_in_capture;
    EXPECT_THAT(std::string(synced_in_capture.message()), HasSubstr("being captured into a CUDA graph"));
    EXPECT_EQ(OnHost(f), in[r]) << "capturing runs nothing";

    // In place, so replay k (from 1) leaves n^(k-1) · sum.
    float scale = 1;
    for (int k = 1; k <= 3; ++k, scale *= n) {
      ASSERT_TRUE(graph->Launch(*stream).ok());
      absl::Status synced = comm->Synchronize(In(absl::Seconds(30)));
      ASSERT_TRUE(synced.ok()) << synced;
      EXPECT_EQ(OnHost(f), Scaled(sum, scale)) << "rank " << r << " replay " << k;
      EXPECT_EQ(OnHost(h), Scaled(sum, scale)) << "rank " << r << " replay " << k;
    }
  });
}

TEST(NcclTest, CaptureRefusesToGrowTheScratchAndKeepsTheCommunicator) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto stream = CudaStream::Create(Device::CUDA(0));
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto comm = Join(*store, 0, 1, stream->handle());
  ASSERT_NE(comm, nullptr);
  const std::vector<float> v = {1.5f, -2, 3, 256};
  Tensor h = OnGpu(v, {2, 2}, DType::kBF16, 0);
  auto graph = CudaGraph::Capture(*stream, [&] { return comm->AllReduce(h); });
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition) << graph.status();
  EXPECT_THAT(std::string(graph.status().message()),
              HasSubstr("nccl group 'tp' rank 0/1: AllReduce(tp, bf16[2, 2]): needs 16 bytes of scratch, more than "
                        "the 0 allocated, while its stream is being captured into a CUDA graph"));
  // Nothing was enqueued and the communicator still works; then the capture succeeds.
  ASSERT_TRUE(comm->AllReduce(h).ok());
  ASSERT_TRUE(comm->Synchronize(In(absl::Seconds(10))).ok());
  EXPECT_EQ(OnHost(h), v);
  graph = CudaGraph::Capture(*stream, [&] { return comm->AllReduce(h); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(graph->Launch(*stream).ok());
  ASSERT_TRUE(comm->Synchronize(In(absl::Seconds(10))).ok());
  EXPECT_EQ(OnHost(h), v);
}

// The peer connects and takes part once, then stops calling: the next
// collective is enqueued (or times out being enqueued), Synchronize reports
// DEADLINE_EXCEEDED within its deadline, and the communicator is broken.
TEST(NcclTest, PeerThatStopsCallingFailsAtSynchronizeAndBreaksTheCommunicator) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two GPUs";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  absl::Notification rank0_done;
  struct NotifyOnExit {
    absl::Notification& done;
    ~NotifyOnExit() {
      if (!done.HasBeenNotified()) done.Notify();
    }
  };
  RunRanks(2, [&](int r) {
    std::optional<NotifyOnExit> release;  // rank 1 waits for rank 0, however rank 0 leaves
    if (r == 0) release.emplace(NotifyOnExit{rank0_done});
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    auto stream = CudaStream::Create(Device::CUDA(r));
    ASSERT_TRUE(stream.ok()) << stream.status();
    auto comm = Join(*store, r, 2, stream->handle(), absl::Seconds(2));
    ASSERT_NE(comm, nullptr);
    Tensor f = OnGpu({1, 2, 3}, {3}, DType::kF32, r);
    ASSERT_TRUE(comm->AllReduce(f).ok());
    ASSERT_TRUE(comm->Synchronize(In(absl::Seconds(30))).ok());
    EXPECT_EQ(OnHost(f), (std::vector<float>{2, 4, 6}));
    if (r == 1) {
      rank0_done.WaitForNotification();  // stays connected, never calls again
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = comm->AllReduce(f);
    const bool enqueued = s.ok();
    if (enqueued) s = comm->Synchronize(In(absl::Seconds(2)));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(enqueued ? "nccl group 'tp' rank 0/2: Synchronize of 1 enqueued call(s), the last "
                                     "AllReduce(tp, f32[3]), did not complete within "
                                   : "nccl group 'tp' rank 0/2: AllReduce(tp, f32[3]) did not complete within 2s"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("the communicator was aborted"));
    EXPECT_LT(elapsed, 5.0);
    absl::Status later = comm->Barrier();
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
    EXPECT_THAT(std::string(later.message()), HasSubstr("Barrier(tp) refused: the communicator is broken"));
    later = comm->Synchronize(In(absl::Seconds(1)));
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
    EXPECT_THAT(std::string(later.message()), HasSubstr("Synchronize refused: the communicator is broken"));
  });
}

TEST(NcclTest, SingleRankGroupRoundsBf16SumsAndCopiesRows) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  NcclOptions options;
  options.device = 0;
  auto comm = MakeNcclCommunicator(*store, "tp", 0, 1, options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const std::vector<float> v = {1.5f, -2, 3, 256, 0.25f, 8};
  Tensor data = OnGpu(v, {3, 2}, DType::kBF16, 0);
  ASSERT_TRUE((*comm)->AllReduce(data).ok());
  EXPECT_EQ(data.To(Device::CPU())->ToFloats(), v);
  Tensor out = Tensor::TryEmpty({3, 2}, DType::kBF16, Device::CUDA(0)).value();
  ASSERT_TRUE((*comm)->ReduceScatterV(data, {3}, out).ok());
  EXPECT_EQ(out.To(Device::CPU())->ToFloats(), v);
  ASSERT_TRUE((*comm)->AllGatherV(data, {3}, out).ok());
  EXPECT_EQ(out.To(Device::CPU())->ToFloats(), v);
  EXPECT_TRUE((*comm)->Broadcast(data, 0).ok());
  EXPECT_TRUE((*comm)->Barrier().ok());
  EXPECT_TRUE((*comm)->Synchronize(In(absl::Seconds(10))).ok());
  absl::Status bad = (*comm)->AllReduce(Tensor::Zeros({2}, DType::kF32));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("nccl group 'tp' rank 0/1: AllReduce: expected tensors on cuda:0"));
}

TEST(NcclTest, RankThatNeverJoinsGivesDeadlineExceeded) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  NcclOptions options;
  options.comm.timeout = absl::Seconds(2);
  options.device = 0;
  const auto start = std::chrono::steady_clock::now();
  auto comm = MakeNcclCommunicator(*store, "tp", 0, 2, options);  // rank 1 never joins
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("nccl group 'tp' rank 0/2"));
  EXPECT_LT(elapsed, 5.0);
}

}  // namespace
}  // namespace seam::comm

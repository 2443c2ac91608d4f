// NcclCommunicator on real GPUs (one thread per GPU, skipped with fewer than
// two): every collective against the serial reference with integer-valued
// data, and the deadline of a rank that never joins.
#include <cuda_runtime_api.h>

#include <chrono>
#include <random>

#include "comm_test_util.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/core/device_memory.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using testing::RunRanks;
using ::testing::HasSubstr;

Tensor OnGpu(const std::vector<float>& v, const Shape& shape, DType dtype, int device) {
  return Tensor::FromFloats(v, shape, dtype).To(Device::CUDA(device)).value();
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

      Tensor all = OnGpu(in[r], {total, width}, dtype, r);
      ASSERT_TRUE(c.AllReduce(all).ok());
      EXPECT_EQ(all.To(Device::CPU())->ToFloats(), sum) << "AllReduce rank " << r;

      Tensor mine = Tensor::TryEmpty({counts[r], width}, dtype, Device::CUDA(r)).value();
      ASSERT_TRUE(c.ReduceScatterV(OnGpu(in[r], {total, width}, dtype, r), counts, mine).ok());
      std::vector<float> expected(sum.begin() + offsets[r] * width, sum.begin() + (offsets[r] + counts[r]) * width);
      EXPECT_EQ(mine.To(Device::CPU())->ToFloats(), expected) << "ReduceScatterV rank " << r;

      Tensor out = Tensor::TryEmpty({total, width}, dtype, Device::CUDA(r)).value();
      std::vector<float> part(in[r].begin(), in[r].begin() + counts[r] * width);
      ASSERT_TRUE(c.AllGatherV(OnGpu(part, {counts[r], width}, dtype, r), counts, out).ok());
      EXPECT_EQ(out.To(Device::CPU())->ToFloats(), gathered) << "AllGatherV rank " << r;

      Tensor b = OnGpu(in[r], {total, width}, dtype, r);
      ASSERT_TRUE(c.Broadcast(b, n - 1).ok());
      EXPECT_EQ(b.To(Device::CPU())->ToFloats(), Tensor::FromFloats(in[n - 1], {total, width}, dtype).ToFloats());
      EXPECT_TRUE(c.Barrier().ok());
      comm->reset();
      cudaStreamDestroy(stream);
    });
  }
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

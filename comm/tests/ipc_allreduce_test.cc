// IpcAllReduceFusion on real GPUs: ranks as threads on one GPU each (skipped
// with too few GPUs), two ranks sharing one GPU, ranks in two processes
// joined through CUDA IPC handles, and a peer that never calls. Tolerances:
//  * against kernels::FusedAddRmsNorm applied to the host's rank-order fp32
//    sum rounded to bf16: bit-identical residual and out;
//  * NCCL's bf16 all-reduce against that host sum: at most one bf16 ulp per
//    element (NCCL may add in another order; at TP 2 the two orders agree);
//  * against NCCL all-reduce + FusedAddRmsNorm: bit-identical on every row
//    whose NCCL sum equals the rank-order sum; on other rows |Δ| ≤ 2 bf16
//    ulps of the larger magnitude plus one ulp of the row's largest |sum|.
#include "seam/comm/ipc_allreduce.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "comm_test_util.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/core/device_memory.h"
#include "seam/core/dtype.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::comm {
namespace {

using testing::RunRanks;

float Bf16Ulp(float v) {
  const float a = std::fabs(v);
  if (a == 0.0f) return 0.0f;
  int e = 0;
  std::frexp(a, &e);  // a = m · 2^e, m in [0.5, 1)
  return std::ldexp(1.0f, e - 8);
}

Tensor OnGpu(const std::vector<float>& v, const Shape& shape, int device) {
  return Tensor::FromFloats(v, shape, DType::kBF16).To(Device::CUDA(device)).value();
}

std::vector<float> ToHost(const Tensor& t) { return t.To(Device::CPU())->ToFloats(); }

// One call's data, the same on every rank (built from the same seed).
struct CallData {
  std::vector<std::vector<float>> partials;  // per rank, bf16 values
  std::vector<float> residual, weight;
  std::vector<float> sum;  // rank-order fp32 sum (FromFloats rounds it to bf16 once)
};

CallData MakeCall(int n, int64_t tokens, int64_t hidden) {
  const int64_t numel = tokens * hidden;
  std::mt19937 rng(static_cast<uint32_t>(tokens * 131 + hidden));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  CallData d;
  d.partials.assign(n, std::vector<float>(numel));
  for (auto& p : d.partials) {
    for (float& v : p) v = BF16ToFloat(FloatToBF16(dist(rng)));
  }
  d.residual.resize(numel);
  d.weight.resize(hidden);
  for (float& v : d.residual) v = dist(rng);
  for (float& v : d.weight) v = 1.0f + 0.1f * dist(rng);
  d.sum.resize(numel);
  for (int64_t i = 0; i < numel; ++i) {
    float acc = d.partials[0][i];
    for (int q = 1; q < n; ++q) acc += d.partials[q][i];
    d.sum[i] = acc;
  }
  return d;
}

constexpr float kEps = 1e-6f;

// Runs the fused call for rank r on `device` and counts elements of residual
// and out that differ from FusedAddRmsNorm over the rank-order sum (must be 0).
int64_t FusedMismatches(IpcAllReduceFusion& fusion, const CallData& d, int r, int device, int64_t tokens,
                        int64_t hidden, cudaStream_t stream) {
  const Shape shape{tokens, hidden};
  const Tensor w = OnGpu(d.weight, {hidden}, device);
  Tensor res_f = OnGpu(d.residual, shape, device);
  Tensor out_f = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(device)).value();
  EXPECT_TRUE(fusion.Run(OnGpu(d.partials[r], shape, device), res_f, w, kEps, out_f, stream).ok());
  const absl::Status error = fusion.CheckError();
  EXPECT_TRUE(error.ok()) << error;
  EXPECT_FALSE(fusion.Failed());
  Tensor res_a = OnGpu(d.residual, shape, device);
  Tensor out_a = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(device)).value();
  EXPECT_TRUE(kernels::FusedAddRmsNorm(OnGpu(d.sum, shape, device), res_a, w, kEps, out_a).ok());
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> rf = ToHost(res_f), of = ToHost(out_f), ra = ToHost(res_a), oa = ToHost(out_a);
  int64_t mismatches = 0;
  for (size_t i = 0; i < rf.size(); ++i) mismatches += (rf[i] != ra[i] || of[i] != oa[i]) ? 1 : 0;
  return mismatches;
}

// NCCL all-reduce + FusedAddRmsNorm against the rank-order reference: NCCL's
// bf16 sum within one ulp of it (equal at TP 2); residual and out equal on
// rows whose sum is equal, else within 2 ulps plus one ulp of the row's
// largest |sum|. Counts violations.
int64_t NcclMismatches(Communicator& nccl, const CallData& d, int r, int n, int64_t tokens, int64_t hidden,
                       cudaStream_t stream) {
  const Shape shape{tokens, hidden};
  const Tensor w = OnGpu(d.weight, {hidden}, r);
  Tensor res_a = OnGpu(d.residual, shape, r);
  Tensor out_a = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(r)).value();
  EXPECT_TRUE(kernels::FusedAddRmsNorm(OnGpu(d.sum, shape, r), res_a, w, kEps, out_a).ok());
  Tensor x_n = OnGpu(d.partials[r], shape, r);
  EXPECT_TRUE(nccl.AllReduce(x_n).ok());
  Tensor res_n = OnGpu(d.residual, shape, r);
  Tensor out_n = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(r)).value();
  EXPECT_TRUE(kernels::FusedAddRmsNorm(x_n, res_n, w, kEps, out_n).ok());
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> ra = ToHost(res_a), oa = ToHost(out_a);
  const std::vector<float> xn = ToHost(x_n), rn = ToHost(res_n), on = ToHost(out_n);
  const std::vector<float> xs = Tensor::FromFloats(d.sum, shape, DType::kBF16).ToFloats();
  int64_t mismatches = 0;
  for (int64_t row = 0; row < tokens; ++row) {
    bool same_sum = true;
    float row_max = 0.0f;
    for (int64_t c = 0; c < hidden; ++c) {
      const int64_t i = row * hidden + c;
      if (std::fabs(xn[i] - xs[i]) > Bf16Ulp(std::max(std::fabs(xn[i]), std::fabs(xs[i])))) ++mismatches;
      same_sum = same_sum && xn[i] == xs[i];
      row_max = std::max(row_max, std::fabs(xs[i]));
    }
    for (int64_t c = 0; c < hidden; ++c) {
      const int64_t i = row * hidden + c;
      if (same_sum) {
        if (ra[i] != rn[i] || oa[i] != on[i]) ++mismatches;
      } else {
        const auto close = [&](float a, float b) {
          return std::fabs(a - b) <= 2 * Bf16Ulp(std::max(std::fabs(a), std::fabs(b))) + Bf16Ulp(row_max);
        };
        if (!close(ra[i], rn[i]) || !close(oa[i], on[i])) ++mismatches;
      }
    }
  }
  if (n == 2) {
    EXPECT_EQ(xn, xs) << "two-rank NCCL sums must equal the rank-order sum";
  }
  return mismatches;
}

// TP n ranks as threads: rank r on GPU r, or every rank on GPU 0 when
// `shared` (then no NCCL, which refuses a GPU twice, and small grids only, so
// both kernels are co-resident).
void CheckTp(int n, bool shared) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<int64_t> token_counts =
      shared ? std::vector<int64_t>{1, 7, 32, 1} : std::vector<int64_t>{1, 7, 64, 256, 7};
  for (int64_t hidden : {int64_t{4096}, int64_t{8192}}) {
    RunRanks(n, [&](int r) {
      const int device = shared ? 0 : r;
      ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
      if (shared) {  // no stream of one rank may wait for the other's through a reused pool block
        cudaMemPool_t pool;
        ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
        int no = 0;
        ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no), cudaSuccess);
      }
      cudaStream_t stream;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      kernels::ScopedStream scoped(stream);
      const std::string prefix = absl::StrCat("tp", n, "_h", hidden);
      IpcAllReduceOptions ipc;
      ipc.allow_shared_device = shared;
      ipc.timeout = absl::Seconds(20);
      auto fusion = IpcAllReduceFusion::Create(MakePrefixStore(prefix + "_ipc", *store), r, n, device, 256, hidden,
                                               ipc);
      ASSERT_TRUE(fusion.ok()) << fusion.status();
      std::unique_ptr<NcclCommunicator> nccl;
      if (!shared) {
        NcclOptions options;
        options.device = r;
        options.stream = stream;
        auto made = MakeNcclCommunicator(MakePrefixStore(prefix + "_nccl", *store), "tp", r, n, options);
        ASSERT_TRUE(made.ok()) << made.status();
        nccl = *std::move(made);
      }
      for (int64_t tokens : token_counts) {
        const CallData d = MakeCall(n, tokens, hidden);
        EXPECT_EQ(FusedMismatches(**fusion, d, r, device, tokens, hidden, stream), 0)
            << "TP " << n << " rank " << r << " T " << tokens << " H " << hidden;
        if (nccl != nullptr) {
          EXPECT_EQ(NcclMismatches(*nccl, d, r, n, tokens, hidden, stream), 0)
              << "NCCL TP " << n << " rank " << r << " T " << tokens << " H " << hidden;
        }
      }
      fusion->reset();
      nccl.reset();
      cudaStreamDestroy(stream);
    });
  }
}

TEST(IpcAllReduceTest, MatchesRankOrderReferenceAndNcclAtTp2) {
  if (CudaDeviceCount() < 2) {
    GTEST_SKIP() << "needs two GPUs (" << CudaDeviceCount() << " visible)";
  }
  CheckTp(2, /*shared=*/false);
}

TEST(IpcAllReduceTest, MatchesRankOrderReferenceAndNcclAtTp4) {
  if (CudaDeviceCount() < 4) {
    GTEST_SKIP() << "needs four GPUs (" << CudaDeviceCount() << " visible)";
  }
  CheckTp(4, /*shared=*/false);
}

// The flag protocol and arithmetic with two ranks sharing one GPU.
TEST(IpcAllReduceTest, MatchesRankOrderReferenceWithRanksSharingAGpu) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  CheckTp(2, /*shared=*/true);
}

TEST(IpcAllReduceTest, RefusesASharedGpuUnlessAllowed) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::vector<absl::Status> status(2);
  RunRanks(2, [&](int r) {
    IpcAllReduceOptions ipc;
    ipc.timeout = absl::Seconds(10);
    status[r] = IpcAllReduceFusion::Create(*store, r, 2, 0, 16, 4096, ipc).status();
  });
  for (const absl::Status& s : status) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("same GPU"));
  }
}

// A rank whose peer never calls passes its deadline: DEADLINE_EXCEEDED, and
// Failed() reports it without waiting.
TEST(IpcAllReduceTest, AMissingPeerEndsAtTheDeadline) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::vector<std::unique_ptr<IpcAllReduceFusion>> fusions(2);
  RunRanks(2, [&](int r) {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    IpcAllReduceOptions ipc;
    ipc.allow_shared_device = true;
    ipc.timeout = absl::Milliseconds(300);
    auto made = IpcAllReduceFusion::Create(*store, r, 2, 0, 16, 4096, ipc);
    ASSERT_TRUE(made.ok()) << made.status();
    fusions[r] = *std::move(made);
  });
  ASSERT_TRUE(fusions[0] && fusions[1]);
  const CallData d = MakeCall(2, 4, 4096);
  const Shape shape{4, 4096};
  Tensor res = OnGpu(d.residual, shape, 0);
  Tensor out = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(0)).value();
  ASSERT_TRUE(fusions[0]->Run(OnGpu(d.partials[0], shape, 0), res, OnGpu(d.weight, {4096}, 0), kEps, out, nullptr).ok());
  const absl::Status s = fusions[0]->CheckError();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(fusions[0]->Failed());
  EXPECT_FALSE(fusions[1]->Failed());
  RunRanks(2, [&](int r) { fusions[r].reset(); });
}

// Ranks in two processes: this one (rank 0) and a child running
// IpcAllReducePeer.Rank1 of this binary, joined through a FileStore and the
// CUDA IPC handles. On one GPU both ranks share it.
constexpr char kPeerEnv[] = "SEAM_IPC_PEER_STORE";

void RunProcessRank(const std::string& store_dir, int r) {
  const bool shared = CudaDeviceCount() < 2;
  const int device = shared ? 0 : r;
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  auto store = MakeFileStore(store_dir);
  ASSERT_TRUE(store.ok()) << store.status();
  IpcAllReduceOptions ipc;
  ipc.allow_shared_device = shared;
  ipc.timeout = absl::Seconds(20);
  auto fusion = IpcAllReduceFusion::Create(*store, r, 2, device, 64, 4096, ipc);
  ASSERT_TRUE(fusion.ok()) << fusion.status();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  kernels::ScopedStream scoped(stream);
  for (int64_t tokens : {int64_t{1}, int64_t{5}, int64_t{32}}) {
    const CallData d = MakeCall(2, tokens, 4096);
    EXPECT_EQ(FusedMismatches(**fusion, d, r, device, tokens, 4096, stream), 0) << "rank " << r << " T " << tokens;
  }
  fusion->reset();
  cudaStreamDestroy(stream);
}

TEST(IpcAllReducePeer, Rank1) {
  const char* dir = getenv(kPeerEnv);
  if (dir == nullptr) GTEST_SKIP() << "the peer half of AcrossProcesses (run by it)";
  RunProcessRank(dir, 1);
}

TEST(IpcAllReduceTest, AcrossProcessesThroughIpcHandles) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  testing::TempDir dir;
  const std::string env = absl::StrCat(kPeerEnv, "=", dir.path());
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=IpcAllReducePeer.Rank1";
  char* argv[] = {self.data(), filter.data(), nullptr};
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  std::string env_copy = env;
  envp.push_back(env_copy.data());
  envp.push_back(nullptr);
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  RunProcessRank(dir.path(), 0);
  // The child's own waits end within their 20 s deadlines; bound ours too.
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      FAIL() << "the peer process did not finish within 60 s";
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer process status " << status;
}

TEST(IpcAllReduceTest, RejectsBadArguments) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(IpcAllReduceFusion::Create(*store, 0, 1, 0, 256, 4096).ok());  // size < 2
  EXPECT_FALSE(IpcAllReduceFusion::Create(*store, 0, 2, 0, 256, 4100).ok());  // hidden % 8
  EXPECT_FALSE(IpcAllReduceFusion::Create(*store, 0, 2, 0, 0, 4096).ok());    // max_tokens
  EXPECT_FALSE(IpcAllReduceFusion::Create(nullptr, 0, 2, 0, 256, 4096).ok());
}

}  // namespace
}  // namespace seam::comm

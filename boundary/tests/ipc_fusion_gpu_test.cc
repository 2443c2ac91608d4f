// The IPC input fusion inside a real layer stack on one GPU: two TP ranks
// (threads, each on its own stream) share GPU 0, their other collectives go
// through the recording communicators (host-staged), and the fused
// all-reduce + add + RMSNorm must give the built-in path's bits exactly (both
// sum bf16 partials in fp32 in rank order and round once, and the kernel's
// norm is FusedAddRmsNorm's). Also: the group-wide measurement gives every
// rank the same table, and a group that cannot build the kernel keeps NCCL
// (auto) or fails (always). Skipped without a GPU.
#include <cuda_runtime_api.h>

#include <thread>

#include <gtest/gtest.h>

#include "seam/testing/temp_dir.h"
#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/ipc_fusion.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/stream_ops.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/store.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::boundary::testing {
namespace {

constexpr int64_t kWidth = 1024;
const Device kGpu = Device::CUDA(0);

Tensor Bf16OnGpu(const std::vector<float>& v, const Shape& shape) {
  return Tensor::FromFloats(v, shape, DType::kBF16).To(kGpu).value();
}

// Rank r's share of a stage output: bf16(x · w_r), w = 3/8, 5/8, computed on
// the GPU as a product with w_r · I (one nonzero term per output, so exact
// before the rounding). It must stay on the GPU: with two ranks on one GPU, a
// copy to pageable host memory waits for the other rank's kernel, which may
// be waiting for this rank's next one.
Tensor ScaledIdentity(int rank) {
  std::vector<float> w(kWidth * kWidth, 0.0f);
  for (int64_t i = 0; i < kWidth; ++i) w[i * kWidth + i] = rank == 0 ? 0.375f : 0.625f;
  return Bf16OnGpu(w, {kWidth, kWidth});
}

absl::StatusOr<Tensor> Partial(const Tensor& x, const Tensor& scaled_identity) {
  SEAM_ASSIGN_OR_RETURN(Tensor out, Tensor::TryEmpty(x.shape(), DType::kBF16, kGpu));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, scaled_identity, out));
  return out;
}

std::vector<float> Seeded(int64_t n, uint32_t seed, float base, float spread) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (float& f : v) {
    s = s * 1664525u + 1013904223u;
    f = base + spread * (static_cast<float>(s >> 8) / 16777216.0f - 0.5f);
  }
  return v;
}

// One TP rank: two attention → FFN layers and the final norm, on GPU 0.
absl::StatusOr<Tensor> Forward(const Topology& t, const StageComms& comms, std::shared_ptr<FusionProvider> fusions,
                               const std::vector<float>& input, int64_t rows) {
  SEAM_RETURN_IF_ERROR(UseDevice(kGpu));
  const Tensor scale = ScaledIdentity(t.tp_rank);
  NormParams norms[5];
  for (int i = 0; i < 5; ++i) {
    norms[i].weight = Bf16OnGpu(Seeded(kWidth, 7 + i, 1.0f, 0.5f), {kWidth});
    norms[i].eps = 1e-6f;
  }
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  std::vector<std::shared_ptr<StageBoundary>> stages;
  for (int l = 0; l < 2; ++l) {
    SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(l, StageItem{DeclareAttn(), &norms[2 * l], {fusions}},
                                                     StageItem{DeclareFfn(), &norms[2 * l + 1], {fusions}}));
    stages.insert(stages.end(), b.begin(), b.end());
  }
  SEAM_RETURN_IF_ERROR(stack.Close());
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {rows});
  batch.comms = comms;
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, Bf16OnGpu(input, {rows, kWidth})));
  for (const auto& stage : stages) {
    SEAM_ASSIGN_OR_RETURN(Tensor x, stage->Prepare(h, batch));
    SEAM_ASSIGN_OR_RETURN(Tensor out, Partial(x, scale));
    if (stage->declaration().kind == StageKind::kFfn && stage->has_fusions()) {
      SEAM_ASSIGN_OR_RETURN(auto scope, stage->Exit(batch));
      SEAM_ASSIGN_OR_RETURN(h, scope->Finish(out));
    } else {
      SEAM_ASSIGN_OR_RETURN(h, stage->Finish(out, batch));
    }
  }
  SEAM_ASSIGN_OR_RETURN(Tensor y, FinalNorm(h, batch, norms[4]));
  return y.To(Device::CPU());
}

// Each rank thread's own stream: ranks sharing a GPU must not queue their
// kernels behind each other's (the one-shot kernels wait for each other).
// For the same reason the shared device's memory pool must not hand one
// rank's freed block to the other by making its stream wait for the first's
// (cudaMemPoolReuseAllowInternalDependencies); ranks on their own GPUs have
// their own pools.
class RankStream {
 public:
  RankStream() {
    cudaSetDevice(0);
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    int no = 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no);
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    SetCurrentCudaStream(stream_);
  }
  ~RankStream() {
    cudaStreamSynchronize(stream_);
    SetCurrentCudaStream(nullptr);
    cudaStreamDestroy(stream_);
  }

 private:
  cudaStream_t stream_ = nullptr;
};

// Runs both ranks with (fuse) or without the IPC fusion; returns rank 0's
// output and checks rank 1's equals it. `runs` gets the fused calls per rank.
Tensor RunTp2(bool fuse, const std::vector<float>& input, int64_t rows, std::vector<int64_t>* runs) {
  seam::testing::TempDir dir;
  auto store = comm::MakeFileStore(dir.path());
  EXPECT_TRUE(store.ok()) << store.status();
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  std::vector<Tensor> outs(2);
  runs->assign(2, 0);
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            RankStream stream;
                            std::shared_ptr<IpcFusionProvider> provider;
                            if (fuse) {
                              // A first unfused forward on this thread sets up what the thread keeps
                              // (e.g. its cuBLAS handle and workspace), whose creation may wait for the
                              // GPU's running kernels: with a shared GPU, the peer's waiting one.
                              SEAM_RETURN_IF_ERROR(Forward(t, comms, nullptr, input, rows).status());
                              comm::IpcAllReduceOptions ipc;
                              ipc.allow_shared_device = true;
                              ipc.timeout = absl::Seconds(5);
                              SEAM_ASSIGN_OR_RETURN(std::unique_ptr<comm::IpcAllReduceFusion> kernel,
                                                    comm::IpcAllReduceFusion::Create(*store, t.tp_rank, 2, 0, 64,
                                                                                     kWidth, ipc));
                              auto fusion = std::make_shared<IpcInputFusion>(SumGroup::kTp, std::move(kernel),
                                                                             comm::AllReduceNormTable{}, true);
                              auto attn = std::make_shared<IpcInputFusion>(SumGroup::kAttnTp, fusion->kernel(),
                                                                           comm::AllReduceNormTable{}, true);
                              provider = std::make_shared<IpcFusionProvider>(
                                  std::vector<std::shared_ptr<IpcInputFusion>>{fusion, attn});
                            }
                            SEAM_ASSIGN_OR_RETURN(outs[t.tp_rank], Forward(t, comms, provider, input, rows));
                            if (provider != nullptr) {
                              (*runs)[t.tp_rank] = provider->runs();
                              SEAM_RETURN_IF_ERROR(provider->candidates()[0]->kernel()->CheckError());
                            }
                            return absl::OkStatus();
                          });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  if (outs[0].defined() && outs[1].defined()) {
    EXPECT_TRUE(BitEqual(outs[0], outs[1]));
  }
  return outs[0];
}

class IpcFusionGpuRows : public ::testing::TestWithParam<int64_t> {};

TEST_P(IpcFusionGpuRows, FusedStackEqualsTheBuiltInPathBitForBit) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  const int64_t rows = GetParam();
  const std::vector<float> input = Seeded(rows * kWidth, static_cast<uint32_t>(rows), 0.0f, 4.0f);
  std::vector<int64_t> runs;
  const Tensor reference = RunTp2(false, input, rows, &runs);
  const Tensor fused = RunTp2(true, input, rows, &runs);
  ASSERT_TRUE(reference.defined() && fused.defined());
  EXPECT_TRUE(BitEqual(fused, reference));
  // Per rank: both FFN inputs and the second attention's input.
  EXPECT_EQ(runs, (std::vector<int64_t>{3, 3}));
}

INSTANTIATE_TEST_SUITE_P(Rows, IpcFusionGpuRows, ::testing::Values(1, 5, 32));

TEST(IpcFusionGpuTest, TheMeasurementGivesEveryRankTheSameTable) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  seam::testing::TempDir dir;
  auto store = comm::MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  std::vector<comm::AllReduceNormTable> tables(2);
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            RankStream stream;
                            SEAM_RETURN_IF_ERROR(UseDevice(kGpu));
                            comm::IpcAllReduceOptions ipc;
                            ipc.allow_shared_device = true;
                            SEAM_ASSIGN_OR_RETURN(auto kernel, comm::IpcAllReduceFusion::Create(
                                                                   *store, t.tp_rank, 2, 0, 16, kWidth, ipc));
                            SEAM_ASSIGN_OR_RETURN(tables[t.tp_rank],
                                                  MeasureAllReduceNorm(*kernel, *comms.tp, kGpu, {1, 4, 16}, 5));
                            return absl::OkStatus();
                          });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  ASSERT_EQ(tables[0].size(), 3u);
  for (const auto& [key, timing] : tables[0]) {
    EXPECT_EQ(key.second, kWidth);
    EXPECT_GT(timing.fused_us, 0);
    EXPECT_GT(timing.unfused_us, 0);
    const auto other = tables[1].find(key);
    ASSERT_NE(other, tables[1].end());
    EXPECT_EQ(other->second.fused_us, timing.fused_us);
    EXPECT_EQ(other->second.unfused_us, timing.unfused_us);
  }
}

// Two ranks on one GPU without allow_shared_device cannot build the kernel:
// in auto the whole group keeps NCCL (and says why), in always it fails.
TEST(IpcFusionGpuTest, AGroupThatCannotBuildTheKernelKeepsNcclInAutoAndFailsInAlways) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "needs a GPU";
  for (AllReduceFusionMode mode : {AllReduceFusionMode::kAuto, AllReduceFusionMode::kAlways}) {
    seam::testing::TempDir dir;
    auto store = comm::MakeFileStore(dir.path());
    ASSERT_TRUE(store.ok()) << store.status();
    auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
    std::vector<absl::StatusOr<std::shared_ptr<IpcFusionProvider>>> got(2, std::shared_ptr<IpcFusionProvider>());
    std::vector<std::string> logs(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        RankStream stream;
        auto groups = comm::ProcessGroups::Create(comm::Topology{2, 1, 1}, r, comm::MakeRecordingGroupFactory(registry));
        if (!groups.ok()) {
          got[r] = groups.status();
          return;
        }
        IpcFusionOptions options;
        options.mode = mode;
        options.timeout = absl::Seconds(10);
        got[r] = MakeIpcFusionProvider(**groups, *store, kGpu, kWidth, options, &logs[r]);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      if (mode == AllReduceFusionMode::kAuto) {
        ASSERT_TRUE(got[r].ok()) << got[r].status();
        EXPECT_EQ(*got[r], nullptr);
        EXPECT_NE(logs[r].find("unavailable, NCCL only"), std::string::npos) << logs[r];
        EXPECT_NE(logs[r].find("same GPU"), std::string::npos) << logs[r];
      } else {
        EXPECT_TRUE(absl::IsFailedPrecondition(got[r].status())) << got[r].status();
      }
    }
  }
}

}  // namespace
}  // namespace seam::boundary::testing

// The IPC input fusion's decisions (no GPU needed): which batches it takes,
// which it leaves to the built-in path, and when a provider is built at all.
// The kernel is a recording fake here; the GPU test runs the real one.
#include "seam/boundary/ipc_fusion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "seam/boundary/plan.h"
#include "seam/comm/self_communicator.h"

namespace seam::boundary {
namespace {

class FakeKernel final : public comm::IpcAllReduceFusion {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int64_t max_tokens() const override { return 64; }
  int64_t hidden() const override { return 1024; }
  bool Supports(const Tensor&, const Tensor&, const Tensor&, const Tensor&) const override { return true; }
  absl::Status Run(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&, void*) override {
    ++runs;
    return absl::OkStatus();
  }
  absl::Status CheckError() override {
    return failed ? absl::DeadlineExceededError("a peer did not publish its rows") : absl::OkStatus();
  }
  bool Failed() const override { return failed; }
  int runs = 0;
  bool failed = false;
};

// A two-rank group as the candidate sees it (only rank and size are read).
class TwoRanks final : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& name() const override { return name_; }
  absl::Status AllReduce(const Tensor&) override { return Unused(); }
  absl::Status ReduceScatter(const Tensor&, const Tensor&) override { return Unused(); }
  absl::Status ReduceScatterV(const Tensor&, const std::vector<int64_t>&, const Tensor&) override { return Unused(); }
  absl::Status AllGather(const Tensor&, const Tensor&) override { return Unused(); }
  absl::Status AllGatherV(const Tensor&, const std::vector<int64_t>&, const Tensor&) override { return Unused(); }
  absl::Status Broadcast(const Tensor&, int) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::InternalError("the candidate must not call a collective"); }
  std::string name_ = "tp";
};

// Tensors that claim a GPU and point nowhere: the decisions never read them.
Tensor OnGpu(const Shape& shape, DType dtype = DType::kBF16) {
  static char dummy[16];
  return Tensor::Borrow(dummy, shape, dtype, Device::CUDA(0));
}

struct Case {
  std::shared_ptr<FakeKernel> kernel = std::make_shared<FakeKernel>();
  TwoRanks group;
  NormParams norm{OnGpu({1024}), 1e-6f};

  absl::StatusOr<bool> Try(IpcInputFusion& f, const Tensor& c) {
    return f.TryCompleteAddNorm(c, OnGpu(c.shape(), c.dtype()), norm, OnGpu(c.shape(), c.dtype()), group);
  }
};

comm::AllReduceNormTable Table() {
  // Fused wins at 1..16 tokens, loses at 64.
  return {{{1, 1024}, {5, 10}}, {{16, 1024}, {8, 12}}, {{64, 1024}, {30, 20}}};
}

TEST(IpcFusionTest, FollowsTheMeasuredTable) {
  Case c;
  IpcInputFusion f(SumGroup::kTp, c.kernel, Table(), /*always=*/false);
  EXPECT_TRUE(f.Chooses(1));
  EXPECT_TRUE(f.Chooses(8));    // bracketed by two winning measurements
  EXPECT_FALSE(f.Chooses(32));  // bracketed by a losing one
  EXPECT_FALSE(f.Chooses(64));
  EXPECT_FALSE(f.Chooses(0));
  EXPECT_EQ(*c.Try(f, OnGpu({8, 1024})), true);
  EXPECT_EQ(*c.Try(f, OnGpu({32, 1024})), false);
  EXPECT_EQ(c.kernel->runs, 1);
  EXPECT_EQ(f.runs(), 1);
}

TEST(IpcFusionTest, AnEmptyTableNeverFusesAndAlwaysIgnoresIt) {
  Case c;
  IpcInputFusion never(SumGroup::kTp, c.kernel, {}, false);
  IpcInputFusion always(SumGroup::kTp, c.kernel, {}, true);
  for (int64_t t : {1, 16, 64}) {
    EXPECT_FALSE(never.Chooses(t));
    EXPECT_TRUE(always.Chooses(t));
  }
  EXPECT_FALSE(always.Chooses(65)) << "beyond the kernel's max_tokens";
}

TEST(IpcFusionTest, DeclinesWhatTheKernelDoesNotTakeBeforeTouchingAnything) {
  Case c;
  IpcInputFusion f(SumGroup::kTp, c.kernel, {}, /*always=*/true);
  const Tensor host = Tensor::Zeros({4, 1024}, DType::kBF16);
  EXPECT_EQ(*c.Try(f, host), false) << "host rows";
  EXPECT_EQ(*c.Try(f, OnGpu({4, 1024}, DType::kF32)), false) << "f32 rows";
  EXPECT_EQ(*c.Try(f, OnGpu({4, 512})), false) << "another width";
  EXPECT_EQ(*c.Try(f, OnGpu({65, 1024})), false) << "more rows than max_tokens";
  EXPECT_EQ(*c.Try(f, OnGpu({0, 1024})), false) << "no rows";
  const std::unique_ptr<comm::Communicator> one = comm::MakeSelfCommunicator("tp");
  EXPECT_EQ(*f.TryCompleteAddNorm(OnGpu({4, 1024}), OnGpu({4, 1024}), c.norm, OnGpu({4, 1024}), *one), false)
      << "a group of another size";
  EXPECT_EQ(c.kernel->runs, 0);
  EXPECT_EQ(*c.Try(f, OnGpu({4, 1024})), true);
  EXPECT_EQ(c.kernel->runs, 1);
}

TEST(IpcFusionTest, AnEarlierMissedDeadlineFailsTheCall) {
  Case c;
  IpcInputFusion f(SumGroup::kTp, c.kernel, {}, true);
  c.kernel->failed = true;
  const absl::StatusOr<bool> r = c.Try(f, OnGpu({4, 1024}));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_EQ(c.kernel->runs, 0);
}

TEST(IpcFusionTest, ParsesModes) {
  EXPECT_EQ(*ParseAllReduceFusionMode("off"), AllReduceFusionMode::kOff);
  EXPECT_EQ(*ParseAllReduceFusionMode("auto"), AllReduceFusionMode::kAuto);
  EXPECT_EQ(*ParseAllReduceFusionMode("always"), AllReduceFusionMode::kAlways);
  const auto bad = ParseAllReduceFusionMode("fast");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("'fast'"));
}

TEST(IpcFusionTest, NoProviderOnTheHostOrWhenOff) {
  auto groups = comm::ProcessGroups::Create(comm::Topology{1, 1, 1}, 0, nullptr);
  ASSERT_TRUE(groups.ok()) << groups.status();
  IpcFusionOptions on;
  auto host = MakeIpcFusionProvider(**groups, nullptr, Device::CPU(), 1024, on);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(*host, nullptr);
  auto single = MakeIpcFusionProvider(**groups, nullptr, Device::CUDA(0), 1024, on);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(*single, nullptr) << "a group of one rank";
  IpcFusionOptions off;
  off.mode = AllReduceFusionMode::kOff;
  auto none = MakeIpcFusionProvider(**groups, nullptr, Device::CUDA(0), 1024, off);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(IpcFusionTest, ProviderOffersEveryCandidateAtEveryInput) {
  Case c;
  auto tp = std::make_shared<IpcInputFusion>(SumGroup::kTp, c.kernel, Table(), false);
  auto attn = std::make_shared<IpcInputFusion>(SumGroup::kAttnTp, c.kernel, Table(), false);
  IpcFusionProvider provider({tp, attn});
  StagePlan plan;
  const auto offered = provider.InputFusions(plan);
  ASSERT_EQ(offered.size(), 2u);
  EXPECT_EQ(offered[0]->completes(), SumGroup::kTp);
  EXPECT_EQ(offered[1]->completes(), SumGroup::kAttnTp);
  ForwardBatch batch(1, BatchVariant::kOrdinary, Topology{}, {1});
  EXPECT_FALSE(provider.CanDeferFinalize(plan, batch));
}

}  // namespace
}  // namespace seam::boundary

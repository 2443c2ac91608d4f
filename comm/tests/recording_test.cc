// The recording fake: deadline on a missing rank, logs of every call, and
// ExpectSameSequence naming the rank whose sequence diverges.
#include <chrono>

#include "comm_test_util.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using testing::RunRanks;
using ::testing::HasSubstr;

TEST(RecordingTest, MissingRankGivesDeadlineExceededThenFailsFast) {
  CommOptions options;
  options.timeout = absl::Seconds(1);
  auto world = RecordingWorld::Create("tp", 3, options);
  testing::Group group = testing::MakeRecordingGroup(world);
  std::vector<absl::Status> first(2), later(2);
  std::vector<double> elapsed(2);
  RunRanks(2, [&](int r) {  // rank 2 never calls
    const auto start = std::chrono::steady_clock::now();
    first[r] = group[r]->AllReduce(Tensor::Zeros({2, 3}, DType::kF32));
    elapsed[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    later[r] = group[r]->Barrier();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(first[r].code(), absl::StatusCode::kDeadlineExceeded) << first[r];
    EXPECT_THAT(std::string(first[r].message()),
                HasSubstr("recording group 'tp' rank " + std::to_string(r) +
                          "/3: AllReduce(tp, f32[2, 3]): call #0 did not complete within 1s: rank(s) 2 did not arrive"));
    EXPECT_LT(elapsed[r], 2.0);
    EXPECT_EQ(later[r].code(), absl::StatusCode::kFailedPrecondition) << later[r];
    EXPECT_THAT(std::string(later[r].message()), HasSubstr("Barrier(tp) refused: the communicator is broken"));
  }
}

TEST(RecordingTest, LogsEveryCallWithShapeDtypeAndRowCounts) {
  auto world = RecordingWorld::Create("attn_tp.dp0", 2);
  testing::Group group = testing::MakeRecordingGroup(world);
  const std::vector<int64_t> counts = {3, 0};
  RunRanks(2, [&](int r) {
    EXPECT_TRUE(group[r]->AllGatherV(Tensor::Zeros({counts[r], 4}, DType::kBF16), counts,
                                     Tensor::Zeros({3, 4}, DType::kBF16)).ok());
    EXPECT_TRUE(group[r]->Broadcast(Tensor::Zeros({5}, DType::kF32), 1).ok());
  });
  const std::vector<CollectiveRecord> log = world->Log(1);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].ToString(), "AllGatherV(attn_tp.dp0, bf16[3, 4], rows [3, 0])");
  EXPECT_EQ(log[1].ToString(), "Broadcast(attn_tp.dp0, f32[5], root 1)");
  EXPECT_EQ(world->Log(0), log);
  EXPECT_TRUE(world->ExpectSameSequence().ok());
}

TEST(RecordingTest, ExpectSameSequenceNamesTheDivergentRank) {
  CommOptions options;
  options.timeout = absl::Seconds(2);
  auto world = RecordingWorld::Create("tp", 3, options);
  testing::Group group = testing::MakeRecordingGroup(world);
  std::vector<absl::Status> results(3);
  RunRanks(3, [&](int r) {
    Tensor t = Tensor::Zeros({2, 3}, DType::kF32);
    results[r] = r == 2 ? group[r]->Broadcast(t, 0) : group[r]->AllReduce(t);
  });
  // The fake notices the mismatch when the ranks meet.
  EXPECT_EQ(results[2].code(), absl::StatusCode::kInternal) << results[2];
  EXPECT_THAT(std::string(results[2].message()),
              HasSubstr("call #0 Broadcast(tp, f32[2, 3], root 0) does not match rank 0's AllReduce(tp, f32[2, 3])"));
  absl::Status s = world->ExpectSameSequence();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "group 'tp': rank 2 diverges at call #0: expected AllReduce(tp, f32[2, 3]) (as rank 0), got "
            "Broadcast(tp, f32[2, 3], root 0); rank 2 issued 1 calls, rank 0 issued 1");
}

TEST(RecordingTest, ExpectSameSequenceNamesARankWithMissingCalls) {
  CollectiveRecord barrier;
  barrier.group = "tp";
  CollectiveRecord reduce{CollectiveKind::kAllReduce, "tp", {4, 8}, DType::kBF16, {}, -1};
  absl::Status s = ExpectSameSequence("tp", {{reduce, barrier}, {reduce}, {reduce, barrier}});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 1 diverges at call #1: expected Barrier(tp) (as rank 0), got no call"));
  EXPECT_TRUE(ExpectSameSequence("tp", {{reduce, barrier}, {reduce, barrier}}).ok());
}

TEST(RecordingTest, RegistryChecksEveryGroup) {
  auto registry = std::make_shared<RecordingRegistry>();
  auto a = registry->World("a", 2);
  EXPECT_EQ(registry->World("a", 2), a);
  auto b = registry->World("b", 1);
  auto comm = b->MakeCommunicator(0);
  EXPECT_TRUE(comm->Barrier().ok());
  EXPECT_EQ(registry->GroupNames(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok());
}

}  // namespace
}  // namespace seam::comm

// Failure behaviour of the Gloo communicator over real TCP loopback: a rank
// that never joins, a rank that stops issuing collectives, a peer that
// leaves, and argument errors that must not break the group.
#include <chrono>

#include "comm_test_util.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using testing::RunRanks;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(1);
constexpr double kSlackSeconds = 1.0;

CommOptions ShortTimeout() {
  CommOptions o;
  o.timeout = kTimeout;
  return o;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(GlooFailureTest, RankThatNeverJoinsGivesDeadlineExceededWithinTheTimeout) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::vector<absl::Status> results(2);
  std::vector<double> elapsed(2);
  RunRanks(2, [&](int r) {  // ranks 0 and 1 of 3 join; rank 2 never does
    const auto start = std::chrono::steady_clock::now();
    results[r] = MakeGlooCommunicator(MakePrefixStore("tp", *store), "tp", r, 3, ShortTimeout()).status();
    elapsed[r] = SecondsSince(start);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    EXPECT_THAT(std::string(results[r].message()),
                HasSubstr("gloo group 'tp' rank " + std::to_string(r) + "/3: rendezvous failed: store key"));
    EXPECT_THAT(std::string(results[r].message()), HasSubstr("did not appear within 1s"));
    EXPECT_LT(elapsed[r], absl::ToDoubleSeconds(kTimeout) + kSlackSeconds) << "rank " << r;
  }
}

TEST(GlooFailureTest, RankThatStopsCallingGivesDeadlineExceededThenFailsFast) {
  testing::TempDir dir;
  testing::Group group = testing::MakeGlooGroup(2, dir.path(), ShortTimeout());
  ASSERT_NE(group[0], nullptr);
  ASSERT_NE(group[1], nullptr);
  Tensor data = Tensor::FromFloats({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});

  auto start = std::chrono::steady_clock::now();
  absl::Status first = group[0]->AllReduce(data);  // rank 1 never calls
  EXPECT_LT(SecondsSince(start), absl::ToDoubleSeconds(kTimeout) + kSlackSeconds);
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  EXPECT_THAT(std::string(first.message()),
              HasSubstr("gloo group 'tp' rank 0/2: AllReduce(tp, f32[4, 2]) did not complete within 1s"));

  start = std::chrono::steady_clock::now();
  absl::Status later = group[0]->Barrier();
  EXPECT_LT(SecondsSince(start), 0.1);
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
  EXPECT_THAT(std::string(later.message()),
              HasSubstr("gloo group 'tp' rank 0/2: Barrier(tp) refused: the communicator is broken"));
  EXPECT_THAT(std::string(later.message()), HasSubstr("AllReduce(tp, f32[4, 2]) did not complete within 1s"));
}

TEST(GlooFailureTest, GatherWhosePeerNeverCallsGivesDeadlineExceeded) {
  testing::TempDir dir;
  testing::Group group = testing::MakeGlooGroup(2, dir.path(), ShortTimeout());
  ASSERT_NE(group[1], nullptr);
  Tensor in = Tensor::FromFloats({1, 2}, {1, 2});
  Tensor out = Tensor::Zeros({3, 2}, DType::kF32);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = group[1]->AllGatherV(in, {2, 1}, out);
  EXPECT_LT(SecondsSince(start), absl::ToDoubleSeconds(kTimeout) + kSlackSeconds);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("gloo group 'tp' rank 1/2: AllGatherV(tp, f32[3, 2], rows [2, 1]) did not complete"));
}

TEST(GlooFailureTest, PeerThatLeavesGivesUnavailable) {
  testing::TempDir dir;
  testing::Group group = testing::MakeGlooGroup(2, dir.path(), ShortTimeout());
  ASSERT_NE(group[0], nullptr);
  group[1].reset();  // closes its connections
  absl::Status s = group[0]->AllReduce(Tensor::FromFloats({1, 2}, {2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("gloo group 'tp' rank 0/2: AllReduce(tp, f32[2]) lost its connection to a peer"));
  EXPECT_EQ(group[0]->Barrier().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GlooFailureTest, InvalidArgumentsAreRejectedWithoutBreakingTheGroup) {
  testing::TempDir dir;
  testing::Group group = testing::MakeGlooGroup(2, dir.path(), ShortTimeout());
  ASSERT_NE(group[0], nullptr);
  ASSERT_NE(group[1], nullptr);
  std::vector<absl::Status> bad(2), good(2);
  RunRanks(2, [&](int r) {
    bad[r] = group[r]->ReduceScatterV(Tensor::Zeros({4, 2}, DType::kF32), {1, 2}, Tensor::Zeros({1, 2}, DType::kF32));
    good[r] = group[r]->AllReduce(Tensor::Zeros({4, 2}, DType::kF32));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(bad[r].code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bad[r].message()),
                HasSubstr("gloo group 'tp' rank " + std::to_string(r) +
                          "/2: ReduceScatterV: input has 4 rows, expected the sum of row_counts [1, 2] = 3"));
    EXPECT_TRUE(good[r].ok()) << good[r];
  }
}

TEST(GlooFailureTest, BadTransportHostIsInvalidArgument) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  GlooTransportOptions transport;
  transport.interface = "no-such-interface0";
  auto comm = MakeGlooCommunicator(*store, "tp", 0, 1, ShortTimeout(), transport);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()),
              HasSubstr("gloo group 'tp' rank 0/1: cannot create a TCP device on interface 'no-such-interface0'"));
}

}  // namespace
}  // namespace seam::comm

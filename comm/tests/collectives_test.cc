// Every collective on real Gloo (TCP loopback, ranks as threads) and on the
// recording fake, for 2 and 4 ranks, f32 and bf16, uneven row counts with an
// empty rank: integer-valued data makes every sum exact, so each rank's
// result must equal the serial reference bit for bit.
#include <cstring>
#include <random>
#include <tuple>

#include "comm_test_util.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using testing::Group;
using testing::RunRanks;

enum class Backend { kGloo, kRecording };
using Param = std::tuple<Backend, int, DType>;

constexpr int64_t kWidth = 6;  // elements per row

std::vector<float> IntegerValues(int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(dist(rng));
  return v;
}

class CollectivesTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::tie(backend_, size_, dtype_) = GetParam();
    CommOptions options;
    options.timeout = absl::Seconds(10);
    if (backend_ == Backend::kGloo) {
      group_ = testing::MakeGlooGroup(size_, dir_.path(), options);
    } else {
      world_ = RecordingWorld::Create("tp", size_, options);
      group_ = testing::MakeRecordingGroup(world_);
    }
    for (const auto& c : group_) ASSERT_NE(c, nullptr);
  }

  // Rows per rank: random in [1, 4] with rank 1 empty.
  std::vector<int64_t> UnevenCounts() {
    std::vector<int64_t> counts(size_);
    std::uniform_int_distribution<int> dist(1, 4);
    for (auto& c : counts) c = dist(rng_);
    counts[1] = 0;
    return counts;
  }

  // One [rows, kWidth] input per rank.
  std::vector<std::vector<float>> Inputs(int64_t rows) {
    std::vector<std::vector<float>> in;
    for (int r = 0; r < size_; ++r) in.push_back(IntegerValues(rows * kWidth, rng_));
    return in;
  }

  Tensor Make(const std::vector<float>& v, int64_t rows) { return Tensor::FromFloats(v, {rows, kWidth}, dtype_); }

  // Runs fn(rank) on every rank's thread; each must return OK.
  void Everyone(const std::function<absl::Status(int, Communicator&)>& fn) {
    std::vector<absl::Status> results(size_);
    RunRanks(size_, [&](int r) { results[r] = fn(r, *group_[r]); });
    for (int r = 0; r < size_; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  }

  std::vector<float> Sum(const std::vector<std::vector<float>>& in) {
    std::vector<float> s(in[0].size(), 0.0f);
    for (const auto& v : in) {
      for (size_t i = 0; i < v.size(); ++i) s[i] += v[i];
    }
    return s;
  }

  Backend backend_;
  int size_;
  DType dtype_;
  std::mt19937 rng_{1234};
  testing::TempDir dir_;
  std::shared_ptr<RecordingWorld> world_;
  Group group_;
};

TEST_P(CollectivesTest, AllReduceSumsEveryRankExactlyForSmallAndLargeTensors) {
  for (int64_t rows : {int64_t{3}, int64_t{5}, int64_t{4000}}) {  // 4000 rows: past the cached size
    auto in = Inputs(rows);
    const std::vector<float> expected = Sum(in);
    std::vector<Tensor> data(size_);
    for (int r = 0; r < size_; ++r) data[r] = Make(in[r], rows);
    Everyone([&](int r, Communicator& c) { return c.AllReduce(data[r]); });
    for (int r = 0; r < size_; ++r) {
      EXPECT_EQ(data[r].ToFloats(), expected) << "rank " << r << " rows " << rows;
      EXPECT_EQ(std::memcmp(data[r].raw_data(), data[0].raw_data(), data[0].nbytes()), 0) << "rank " << r;
    }
  }
}

TEST_P(CollectivesTest, AllReduceGivesIdenticalBitsOnEveryRankForInexactSums) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Tensor> data(size_);
  for (int r = 0; r < size_; ++r) {
    std::vector<float> v(7 * kWidth);
    for (auto& x : v) x = dist(rng_) * 1e-3f + dist(rng_);
    data[r] = Make(v, 7);
  }
  Everyone([&](int r, Communicator& c) { return c.AllReduce(data[r]); });
  for (int r = 1; r < size_; ++r) {
    EXPECT_EQ(std::memcmp(data[r].raw_data(), data[0].raw_data(), data[0].nbytes()), 0) << "rank " << r;
  }
}

TEST_P(CollectivesTest, ReduceScatterGivesEachRankItsSummedRows) {
  const int64_t per_rank = 2;
  auto in = Inputs(per_rank * size_);
  const std::vector<float> sum = Sum(in);
  std::vector<Tensor> out(size_);
  Everyone([&](int r, Communicator& c) {
    out[r] = Tensor::Zeros({per_rank, kWidth}, dtype_);
    return c.ReduceScatter(Make(in[r], per_rank * size_), out[r]);
  });
  for (int r = 0; r < size_; ++r) {
    std::vector<float> expected(sum.begin() + r * per_rank * kWidth, sum.begin() + (r + 1) * per_rank * kWidth);
    EXPECT_EQ(out[r].ToFloats(), expected) << "rank " << r;
  }
}

TEST_P(CollectivesTest, ReduceScatterVGivesEachRankItsRowsIncludingAnEmptyRank) {
  const std::vector<int64_t> counts = UnevenCounts();
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  auto in = Inputs(total);
  const std::vector<float> sum = Sum(in);
  std::vector<Tensor> out(size_);
  Everyone([&](int r, Communicator& c) {
    out[r] = Tensor::Zeros({counts[r], kWidth}, dtype_);
    return c.ReduceScatterV(Make(in[r], total), counts, out[r]);
  });
  int64_t offset = 0;
  for (int r = 0; r < size_; ++r) {
    std::vector<float> expected(sum.begin() + offset * kWidth, sum.begin() + (offset + counts[r]) * kWidth);
    EXPECT_EQ(out[r].ToFloats(), expected) << "rank " << r;
    offset += counts[r];
  }
}

TEST_P(CollectivesTest, AllGatherConcatenatesRanksInOrder) {
  auto in = Inputs(3);
  std::vector<float> expected;
  for (const auto& v : in) expected.insert(expected.end(), v.begin(), v.end());
  std::vector<Tensor> out(size_);
  Everyone([&](int r, Communicator& c) {
    out[r] = Tensor::Zeros({3 * size_, kWidth}, dtype_);
    return c.AllGather(Make(in[r], 3), out[r]);
  });
  for (int r = 0; r < size_; ++r) EXPECT_EQ(out[r].ToFloats(), expected) << "rank " << r;
}

TEST_P(CollectivesTest, AllGatherVConcatenatesUnevenRowsIncludingAnEmptyRank) {
  const std::vector<int64_t> counts = UnevenCounts();
  int64_t total = 0;
  std::vector<std::vector<float>> in;
  std::vector<float> expected;
  for (int r = 0; r < size_; ++r) {
    in.push_back(IntegerValues(counts[r] * kWidth, rng_));
    expected.insert(expected.end(), in[r].begin(), in[r].end());
    total += counts[r];
  }
  std::vector<Tensor> out(size_);
  Everyone([&](int r, Communicator& c) {
    out[r] = Tensor::Zeros({total, kWidth}, dtype_);
    return c.AllGatherV(Make(in[r], counts[r]), counts, out[r]);
  });
  for (int r = 0; r < size_; ++r) EXPECT_EQ(out[r].ToFloats(), expected) << "rank " << r;
}

TEST_P(CollectivesTest, BroadcastCopiesTheRootToEveryRank) {
  const int root = size_ - 1;
  auto in = Inputs(4);
  std::vector<Tensor> data(size_);
  for (int r = 0; r < size_; ++r) data[r] = Make(in[r], 4);
  Everyone([&](int r, Communicator& c) { return c.Broadcast(data[r], root); });
  const std::vector<float> expected = Make(in[root], 4).ToFloats();
  for (int r = 0; r < size_; ++r) EXPECT_EQ(data[r].ToFloats(), expected) << "rank " << r;
}

TEST_P(CollectivesTest, BarrierAndEmptyTensorsSucceedOnEveryRank) {
  Everyone([&](int r, Communicator& c) -> absl::Status {
    SEAM_RETURN_IF_ERROR(c.Barrier());
    SEAM_RETURN_IF_ERROR(c.AllReduce(Tensor::Zeros({0, kWidth}, dtype_)));
    std::vector<int64_t> zeros(size_, 0);
    SEAM_RETURN_IF_ERROR(c.AllGatherV(Tensor::Zeros({0, kWidth}, dtype_), zeros, Tensor::Zeros({0, kWidth}, dtype_)));
    return c.Barrier();
  });
}

TEST_P(CollectivesTest, IntegerTensorsAreSummedAsIntegers) {
  std::vector<Tensor> data(size_);
  for (int r = 0; r < size_; ++r) data[r] = Tensor::FromInts({r, 1 << 25, -r}, {3});
  Everyone([&](int r, Communicator& c) { return c.AllReduce(data[r]); });
  const int32_t ranks_sum = size_ * (size_ - 1) / 2;
  for (int r = 0; r < size_; ++r) {
    const int32_t* v = data[r].data<int32_t>();
    EXPECT_EQ(v[0], ranks_sum);
    EXPECT_EQ(v[1], size_ * (1 << 25));
    EXPECT_EQ(v[2], -ranks_sum);
  }
}

// Host backends finish every call before it returns: Synchronize has nothing
// to wait for (OK even past its deadline) and is not a collective, so the
// recording fake does not log it.
TEST_P(CollectivesTest, SynchronizeAfterCollectivesIsOkAndNotLogged) {
  auto in = Inputs(3);
  const std::vector<float> expected = Sum(in);
  std::vector<Tensor> data(size_);
  for (int r = 0; r < size_; ++r) data[r] = Make(in[r], 3);
  Everyone([&](int r, Communicator& c) -> absl::Status {
    SEAM_RETURN_IF_ERROR(c.AllReduce(data[r]));
    SEAM_RETURN_IF_ERROR(c.Synchronize(absl::Now() + absl::Seconds(10)));
    SEAM_RETURN_IF_ERROR(c.Barrier());
    return c.Synchronize(absl::InfinitePast());
  });
  for (int r = 0; r < size_; ++r) EXPECT_EQ(data[r].ToFloats(), expected) << "rank " << r;
  if (world_ != nullptr) {
    for (int r = 0; r < size_; ++r) {
      const std::vector<CollectiveRecord> log = world_->Log(r);
      ASSERT_EQ(log.size(), 2u) << "rank " << r;
      EXPECT_EQ(log[0].kind, CollectiveKind::kAllReduce);
      EXPECT_EQ(log[1].ToString(), "Barrier(tp)");
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const auto& [backend, size, dtype] = info.param;
  return std::string(backend == Backend::kGloo ? "Gloo" : "Recording") + std::to_string(size) + "Ranks" +
         DTypeName(dtype);
}

INSTANTIATE_TEST_SUITE_P(Backends, CollectivesTest,
                         ::testing::Combine(::testing::Values(Backend::kGloo, Backend::kRecording),
                                            ::testing::Values(2, 4), ::testing::Values(DType::kF32, DType::kBF16)),
                         ParamName);

}  // namespace
}  // namespace seam::comm

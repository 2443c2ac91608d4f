// Embedding over one vocab-parallel shard: ids inside the shard copy their
// row, ids outside it give zero rows, and the table's dtype converts to out's.
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::RandomTensor;

// ids straddling the shard [100, 120): below, inside at both edges, above.
const std::vector<int32_t> kIds = {99, 100, 105, 119, 120, 0, 110};

void ExpectShardRows(const Tensor& table, const Tensor& out) {
  const int64_t h = table.dim(1);
  const std::vector<float> t = table.ToFloats(), o = out.ToFloats();
  for (size_t r = 0; r < kIds.size(); ++r) {
    const int64_t local = kIds[r] - 100;
    for (int64_t i = 0; i < h; ++i) {
      const float want = local >= 0 && local < 20 ? t[local * h + i] : 0.0f;
      ASSERT_EQ(o[r * h + i], want) << "row " << r << " (id " << kIds[r] << ") column " << i;
    }
  }
}

TEST(Embedding, CopiesRowsOfItsShardAndZeroesOtherIds) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor table = RandomTensor({20, 96}, dtype, 41);
    const Tensor out = Tensor::FromFloats(std::vector<float>(kIds.size() * 96, 7.0f), {7, 96}, dtype);
    ASSERT_TRUE(Embedding(Tensor::FromInts(kIds, {7}), table, 100, out).ok());
    ExpectShardRows(table, out);  // a copy: exact
  }
}

TEST(Embedding, ConvertsTheTableDtypeToTheOutputDtype) {
  const Tensor table = RandomTensor({20, 80}, DType::kBF16, 42);
  const Tensor out = Tensor::Empty({7, 80}, DType::kF32);
  ASSERT_TRUE(Embedding(Tensor::FromInts(kIds, {7}), table, 100, out).ok());
  ExpectShardRows(table, out);  // bf16 widens exactly to f32
}

TEST(Embedding, ZeroIdsAreAccepted) {
  EXPECT_TRUE(Embedding(Tensor::FromInts({}, {0}), RandomTensor({20, 96}, DType::kBF16, 43), 0,
                        Tensor::Empty({0, 96}, DType::kBF16))
                  .ok());
}

}  // namespace
}  // namespace seam::kernels

// The MHC mixes on CUDA against the CPU reference: n = 1, 2, 4 and 8 streams,
// odd row counts and widths, f32 and bf16 residuals. Both sides multiply and
// add separately in the same order and round once, so f32 must agree bit
// for bit; bf16 within one storage ulp (each side rounds its fp32 value).
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/mhc.h"

namespace seam::kernels::cuda_test {
namespace {

// (dtype, streams, rows, hidden).
using Param = std::tuple<DType, int, int64_t, int64_t>;
class MhcTest : public CudaKernelsTest, public ::testing::WithParamInterface<Param> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  int streams() const { return std::get<1>(GetParam()); }
  int64_t rows() const { return std::get<2>(GetParam()); }
  int64_t hidden() const { return std::get<3>(GetParam()); }
  Tolerance tol() const { return dtype() == DType::kF32 ? kExact : ToleranceFor(dtype()); }
  std::vector<float> Coefficients(int count, uint32_t seed) const {
    return Random({count}, DType::kF32, seed, -1.0f, 1.0f).ToFloats();
  }
};

TEST_P(MhcTest, PostMixInPlaceMatchesCpu) {
  const int n = streams();
  const Tensor x = Random({rows(), n * hidden()}, dtype(), 31);
  const Tensor y = Random({rows(), hidden()}, dtype(), 32);
  const std::vector<float> res = Coefficients(n * n, 33), post = Coefficients(n, 34);
  const Tensor gx = OnGpu(x);
  ASSERT_TRUE(MhcPostMix(x, y, res, post).ok());
  const absl::Status s = MhcPostMix(gx, OnGpu(y), res, post);
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gx, x, tol(), "residual");
}

TEST_P(MhcTest, PreMixMatchesCpu) {
  const int n = streams();
  const Tensor x = Random({rows(), n * hidden()}, dtype(), 41);
  const std::vector<float> pre = Coefficients(n, 42);
  const Tensor out = PoisonedHost({rows(), hidden()}, dtype());
  ASSERT_TRUE(MhcPreMix(x, pre, out).ok());
  const Tensor gout = PoisonedGpu({rows(), hidden()}, dtype());
  const absl::Status s = MhcPreMix(OnGpu(x), pre, gout);
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gout, out, tol(), "out");
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_n" + std::to_string(std::get<1>(info.param)) + "_" +
         std::to_string(std::get<2>(info.param)) + "x" + std::to_string(std::get<3>(info.param));
}

// 2 dtypes × 4 stream counts × 3 row counts × 2 widths = 48 parameters, 96 cases.
INSTANTIATE_TEST_SUITE_P(Grid, MhcTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16), ::testing::Values(1, 2, 4, 8),
                                            ::testing::Values<int64_t>(1, 7, 33),
                                            ::testing::Values<int64_t>(96, 1001)),
                         Name);

}  // namespace
}  // namespace seam::kernels::cuda_test

// Test support for the kernels: random inputs of a storage dtype, tensors
// read back as doubles, tolerance checks, and a paged-attention fixture that
// lays sequences out in non-contiguous cache blocks.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"

namespace seam {
// Prints a dtype parameter by name in gtest messages.
inline void PrintTo(DType dtype, std::ostream* os) { *os << DTypeName(dtype); }
}  // namespace seam

namespace seam::kernels::testing {

// Values of magnitude in [0.05, 1] with random sign, rounded to `dtype`.
// Keeping magnitudes away from zero makes fp32 sums of two stored values exact.
Tensor RandomTensor(const Shape& shape, DType dtype, uint64_t seed);
// Every element as double, row-major.
std::vector<double> Values(const Tensor& t);
// Every element of an i32 tensor.
std::vector<int32_t> Ints(const Tensor& t);

// Relative bound of rounding an fp32 result once to `dtype`: half an ulp.
double HalfUlp(DType dtype);

// Expects |got[i] - want[i]| <= rel * max(|want[i]|, rms(want)) for every i:
// relative per element, with the tensor's RMS as the floor where a sum cancels.
void ExpectAllClose(const Tensor& got, const std::vector<double>& want, double rel, const std::string& what);

// gtest parameter name: "f32", "bf16".
std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info);

// A batch of sequences over a paged cache with Hq query heads and Hk kv heads.
// Each sequence has `context` tokens of which the last `q_len` are queries.
// Blocks are handed out in a shuffled order so block tables are not contiguous.
struct SeqSpec {
  int context;
  int q_len;
};
struct PagedFixture {
  PagedFixture(std::vector<SeqSpec> seqs, int hq, int hk, int head_dim, int block_size, DType dtype,
               uint64_t seed);

  // The batch of every sequence's last q_len tokens (q rows in sequence order).
  AttentionBatch Batch() const;
  // Writes tokens [from, to) of sequence b into the caches.
  void WriteTokens(int b, int from, int to);
  // Rows of the full query tensor `q` belonging to sequence b's query token j.
  int64_t QueryRow(int b, int j) const;
  // Double-precision causal GQA over the logical (unpaged) keys and values.
  std::vector<double> Reference(float scale) const;

  std::vector<SeqSpec> seqs;
  int hq, hk, head_dim, block_size;
  DType dtype;
  std::vector<Tensor> keys, values;      // per sequence: [context, Hk, D]
  std::vector<std::vector<int32_t>> tables;  // per sequence: block ids
  int max_blocks = 0;
  Tensor q;                              // [sum q_len, Hq, D]
  Tensor k_cache, v_cache;               // [num_blocks, block_size, Hk, D]
};

}  // namespace seam::kernels::testing

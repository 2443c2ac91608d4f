// GlooReducer: sums a host buffer over a Gloo context into scratch memory it
// owns. Small sums reuse a cached ring algorithm per (accumulator, size
// bucket), large ones use Gloo's per-call ring allreduce. Both reduce each
// chunk on one rank and then copy it, so every rank gets the same bits.
// Throws Gloo's exceptions; the caller converts them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <gloo/algorithm.h>
#include <gloo/context.h>

#include "host_reduce.h"
#include "seam/core/dtype.h"

namespace seam::comm::internal {

class GlooReducer {
 public:
  explicit GlooReducer(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}

  // Σ_ranks of n elements of `dtype` at src, as accumulator elements
  // (AccumulatorOf(dtype)) in scratch valid until the next call. n > 0.
  const void* Sum(const void* src, DType dtype, int64_t n);

  // Sums of at most this many elements use the cached algorithms.
  static constexpr int64_t kCachedMaxElements = 16384;
  // The cached size for n elements: at most 12.5% (or 64 elements) above n.
  static int64_t Bucket(int64_t n);
  size_t cached_algorithms() const { return cache_.size(); }

 private:
  struct Cached {
    std::vector<int64_t> buffer;  // 8-byte aligned accumulator elements
    std::unique_ptr<gloo::Algorithm> algorithm;
  };
  Cached& CachedFor(Accumulator acc, int64_t bucket);

  std::shared_ptr<gloo::Context> context_;
  std::map<std::pair<Accumulator, int64_t>, Cached> cache_;
  std::vector<int64_t> large_;  // scratch of the per-call path
};

}  // namespace seam::comm::internal

// Cached and per-call Gloo allreduce over scratch (see gloo_reducer.h).
#include "gloo_reducer.h"

#include <cstring>

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>

namespace seam::comm::internal {
namespace {

template <typename T>
std::unique_ptr<gloo::Algorithm> MakeRing(const std::shared_ptr<gloo::Context>& context, void* buffer,
                                          int64_t count) {
  std::vector<T*> ptrs{static_cast<T*>(buffer)};
  return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, static_cast<int>(count));
}

template <typename T>
void AllreduceInPlace(const std::shared_ptr<gloo::Context>& context, void* buffer, int64_t count) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput<T>(static_cast<T*>(buffer), static_cast<size_t>(count));
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  gloo::allreduce(opts);
}

}  // namespace

int64_t GlooReducer::Bucket(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  const int64_t step = std::max<int64_t>(p / 8, 64);
  return (n + step - 1) / step * step;
}

GlooReducer::Cached& GlooReducer::CachedFor(Accumulator acc, int64_t bucket) {
  auto it = cache_.find({acc, bucket});
  if (it != cache_.end()) return it->second;
  // Every rank issues the same calls, so every rank builds the same entries in
  // the same order and the algorithms' slots match across ranks.
  Cached entry;
  entry.buffer.assign((bucket * AccumulatorSize(acc) + 7) / 8, 0);
  void* buf = entry.buffer.data();
  switch (acc) {
    case Accumulator::kF32: entry.algorithm = MakeRing<float>(context_, buf, bucket); break;
    case Accumulator::kI32: entry.algorithm = MakeRing<int32_t>(context_, buf, bucket); break;
    case Accumulator::kI64: entry.algorithm = MakeRing<int64_t>(context_, buf, bucket); break;
  }
  return cache_.emplace(std::make_pair(acc, bucket), std::move(entry)).first->second;
}

const void* GlooReducer::Sum(const void* src, DType dtype, int64_t n) {
  const Accumulator acc = AccumulatorOf(dtype);
  const size_t es = AccumulatorSize(acc);
  if (n <= kCachedMaxElements) {
    const int64_t bucket = Bucket(n);
    Cached& entry = CachedFor(acc, bucket);
    char* buf = reinterpret_cast<char*>(entry.buffer.data());
    LoadAccumulator(src, dtype, n, buf);
    std::memset(buf + n * es, 0, (bucket - n) * es);  // the padding sums to zero
    entry.algorithm->run();
    return buf;
  }
  large_.resize((n * es + 7) / 8);
  void* buf = large_.data();
  LoadAccumulator(src, dtype, n, buf);
  switch (acc) {
    case Accumulator::kF32: AllreduceInPlace<float>(context_, buf, n); break;
    case Accumulator::kI32: AllreduceInPlace<int32_t>(context_, buf, n); break;
    case Accumulator::kI64: AllreduceInPlace<int64_t>(context_, buf, n); break;
  }
  return buf;
}

}  // namespace seam::comm::internal

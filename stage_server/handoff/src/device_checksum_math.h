// The arithmetic of the device checksum (seam/handoff/device_checksum.h),
// shared word for word by the CPU reference and the CUDA kernel, so the two
// cannot drift apart. Internal to seam_handoff.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SEAM_CHECKSUM_FN __host__ __device__ __forceinline__
#else
#define SEAM_CHECKSUM_FN inline
#endif

namespace seam::handoff::checksum {

inline constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;  // the Mersenne prime 2^61 - 1
inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// a · b mod 2^61 - 1, for a, b < 2^61.
SEAM_CHECKSUM_FN uint64_t MulMod(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  const uint64_t lo = a * b, hi = __umul64hi(a, b);
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  const uint64_t lo = static_cast<uint64_t>(p), hi = static_cast<uint64_t>(p >> 64);
#endif
  // p = hi·2^64 + lo = (p >> 61)·2^61 + (p & kPrime), and 2^61 ≡ 1.
  uint64_t r = (lo & kPrime) + ((lo >> 61) | (hi << 3));
  r = (r & kPrime) + (r >> 61);
  return r >= kPrime ? r - kPrime : r;
}

// a + b mod 2^61 - 1, for a, b < 2^61 - 1.
SEAM_CHECKSUM_FN uint64_t AddMod(uint64_t a, uint64_t b) {
  const uint64_t r = a + b;
  return r >= kPrime ? r - kPrime : r;
}

// The key of 32-bit word `index`: SplitMix64's output for the seed's
// sequence at that position, reduced into [1, 2^61 - 2].
SEAM_CHECKSUM_FN uint64_t Key(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const uint64_t k = (z & kPrime) + (z >> 61);
  const uint64_t reduced = k >= kPrime ? k - kPrime : k;
  return reduced == 0 ? 1 : reduced;
}

// One word's term: key · word.
SEAM_CHECKSUM_FN uint64_t Term(uint64_t seed, uint64_t index, uint32_t word) {
  return MulMod(Key(seed, index), word);
}

}  // namespace seam::handoff::checksum

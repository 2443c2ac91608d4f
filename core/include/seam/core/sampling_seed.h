// The seeds of sampled draws, shared by the coordinator (which gives each
// sequence of a request its own seed) and the kernels (which key a draw by
// a sequence's seed and its generation step): integer recipes only, the same
// bits on every host and device.
#pragma once

#include <cstdint>

namespace seam {

// The splitmix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix.
constexpr uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The seed of sequence `index` of a request seeded `request_seed`: sequence
// 0 draws with the request's seed itself (a one-sequence request seeded s is
// a sequence seeded s), sequence i > 0 with a mix of both, so that the
// choices of `n` and the prompts of one request draw independently.
constexpr uint64_t SequenceSeed(uint64_t request_seed, uint64_t index) {
  return index == 0 ? request_seed : SplitMix64(request_seed ^ SplitMix64(index));
}

}  // namespace seam

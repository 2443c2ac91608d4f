// The checksum of payloads that travel through a device link (CUDA IPC),
// computed by a kernel on both sides instead of CRC-32C: a CRC is a serial
// recurrence whose parallel form needs per-block CRC shifts and combination,
// while this one is a sum, so any grid of threads adds its terms in any order
// and gets the same value, in the same pass that copies the bytes.
//
// Definition. The bytes are read as little-endian 32-bit words w_j (a last
// partial word padded with zero bytes); word j of a span that starts at word
// position f has key k(s, f + j), where k(s, i) is SplitMix64's output for
// seed s at position i reduced modulo p = 2^61 - 1 (never 0). The checksum of
// a set of spans is  Σ k(s, f + j) · w_j  mod p.
//
// Strength. For keys drawn at random this is a universal hash: two payloads
// that differ (in any words) give the same sum with probability 1/p ≈ 2^-61,
// against 2^-32 for CRC-32C; a change of a single word is always detected
// (k ≠ 0 and p is prime). The producer draws a fresh seed per handoff and
// sends it in the MAC'd header. It is not a MAC: the header's HMAC, which
// covers the checksums, is what authenticates the data.
#pragma once

#include <cstdint>
#include <vector>

namespace seam::handoff {

// Bytes at `data` whose first word has position `first_word`.
struct ChecksumSpan {
  const void* data = nullptr;
  uint64_t bytes = 0;
  uint64_t first_word = 0;
};

// The device checksum of host bytes (the reference the kernel is tested against).
uint64_t DeviceChecksum(uint64_t seed, const std::vector<ChecksumSpan>& spans);

}  // namespace seam::handoff

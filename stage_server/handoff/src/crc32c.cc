// CRC-32C: an SSE4.2 path (8 bytes per crc32 instruction) chosen at run time,
// and a 256-entry table fallback that gives the same result on any CPU.
#include "seam/handoff/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define SEAM_CRC32C_X86 1
#endif

namespace seam::handoff {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // reflected Castagnoli

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    table[i] = crc;
  }
  return table;
}

// Works on the inverted register: callers invert on entry and exit.
uint32_t UpdatePortable(uint32_t state, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = MakeTable();
  for (size_t i = 0; i < n; ++i) state = table[(state ^ p[i]) & 0xffu] ^ (state >> 8);
  return state;
}

#ifdef SEAM_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t UpdateSse42(uint32_t state, const unsigned char* p, size_t n) {
#if defined(__x86_64__)
  uint64_t state64 = state;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    state64 = _mm_crc32_u64(state64, word);
    p += 8;
    n -= 8;
  }
  state = static_cast<uint32_t>(state64);
#endif
  while (n > 0) {
    state = _mm_crc32_u8(state, *p);
    ++p;
    --n;
  }
  return state;
}

bool CpuHasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size) {
  if (size == 0) return crc;
  return ~UpdatePortable(~crc, static_cast<const unsigned char*>(data), size);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  if (size == 0) return crc;
#ifdef SEAM_CRC32C_X86
  if (CpuHasSse42()) return ~UpdateSse42(~crc, static_cast<const unsigned char*>(data), size);
#endif
  return Crc32cExtendPortable(crc, data, size);
}

uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

bool Crc32cIsHardwareAccelerated() {
#ifdef SEAM_CRC32C_X86
  return CpuHasSse42();
#else
  return false;
#endif
}

}  // namespace seam::handoff

// CRC-32C: an SSE4.2 path (8 bytes per crc32 instruction, three interleaved
// chains on long inputs) chosen at run time, and a 256-entry table fallback
// that gives the same result on any CPU.
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
// The crc32 instruction has a latency of three cycles and a throughput of
// one per cycle, so one dependent chain runs at a third of its speed. Long
// inputs run as three interleaved chains over consecutive blocks of the same
// length L, joined by the "shift" operator (the raw register advanced over L
// zero bytes, which is linear in the register, hence four byte tables):
//   raw(s, A‖B) = shift_L(raw(s, A)) ⊕ raw(0, B)   for |B| = L.
struct ShiftTable {
  uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) uint32_t ShiftByZeros(uint32_t state, size_t zeros) {
  uint64_t s = state;
  for (size_t i = 0; i < zeros / 8; ++i) s = _mm_crc32_u64(s, 0);
  return static_cast<uint32_t>(s);
}

ShiftTable MakeShiftTable(size_t block) {
  ShiftTable table;
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) table.t[k][b] = ShiftByZeros(b << (8 * k), block);
  }
  return table;
}

uint32_t Shift(const ShiftTable& table, uint32_t s) {
  return table.t[0][s & 0xffu] ^ table.t[1][(s >> 8) & 0xffu] ^ table.t[2][(s >> 16) & 0xffu] ^ table.t[3][s >> 24];
}

constexpr size_t kLongBlock = 8192;  // 24 KiB per round
constexpr size_t kShortBlock = 256;  // 768 bytes per round, for what is left

// Consumes rounds of three `block`-byte blocks from p/n.
__attribute__((target("sse4.2"))) uint32_t ThreeChains(uint32_t state, const unsigned char*& p, size_t& n,
                                                       size_t block, const ShiftTable& table) {
  while (n >= 3 * block) {
    uint64_t s0 = state, s1 = 0, s2 = 0;
    for (size_t i = 0; i < block; i += 8) {
      uint64_t a, b, c;
      std::memcpy(&a, p + i, 8);
      std::memcpy(&b, p + block + i, 8);
      std::memcpy(&c, p + 2 * block + i, 8);
      s0 = _mm_crc32_u64(s0, a);
      s1 = _mm_crc32_u64(s1, b);
      s2 = _mm_crc32_u64(s2, c);
    }
    state = Shift(table, Shift(table, static_cast<uint32_t>(s0)) ^ static_cast<uint32_t>(s1)) ^
            static_cast<uint32_t>(s2);
    p += 3 * block;
    n -= 3 * block;
  }
  return state;
}

__attribute__((target("sse4.2"))) uint32_t UpdateSse42(uint32_t state, const unsigned char* p, size_t n) {
#if defined(__x86_64__)
  if (n >= 3 * kShortBlock) {
    static const ShiftTable long_table = MakeShiftTable(kLongBlock);
    static const ShiftTable short_table = MakeShiftTable(kShortBlock);
    state = ThreeChains(state, p, n, kLongBlock, long_table);
    state = ThreeChains(state, p, n, kShortBlock, short_table);
  }
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

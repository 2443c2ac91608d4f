// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) over handoff payloads.
// Written here because no Debian C++ package provides it; uses the SSE4.2
// crc32 instruction when the CPU has it and a byte table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seam::handoff {

// CRC-32C of `size` bytes at `data` (data may be null when size is 0).
// Crc32c("123456789", 9) == 0xE3069283.
uint32_t Crc32c(const void* data, size_t size);

// Continues a CRC-32C: Crc32cExtend(Crc32c(a), b) == Crc32c(a followed by b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// The portable table implementation, exposed so tests can compare both paths.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);

// True when Crc32c uses the SSE4.2 instruction on this CPU.
bool Crc32cIsHardwareAccelerated();

}  // namespace seam::handoff

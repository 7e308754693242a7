// CRC-32C (Castagnoli), the checksum of every .pstrace chunk. Uses the SSE4.2
// instruction when the processor has it, a table otherwise. Heap-free: the
// recorder links it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace psc {

uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace psc

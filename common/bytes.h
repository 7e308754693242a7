// Byte counts as people read them: the one formatter every report, table and
// exporter label uses.
#pragma once

#include <cstdint>
#include <string>

namespace psc {

// "512 B" below 1 KiB, else two decimals in the largest binary unit that keeps
// the value at least 1: "1.50 GiB".
std::string format_bytes(uint64_t bytes);

// The value in MiB with two decimals and no unit ("64.00"), for tables whose
// column header names the unit.
std::string format_mib(int64_t bytes);

}  // namespace psc

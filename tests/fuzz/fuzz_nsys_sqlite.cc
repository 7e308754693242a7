// libFuzzer target: the nsys-sqlite importer on arbitrary bytes (SQLite's own
// checks meet a damaged database; ours meet a well-formed one with wrong
// contents). Bad input must be an InputError, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "exchange/export_formats.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A real file: SQLite resolves /proc/self/fd links to the memfd's name and
  // cannot open that.
  const std::string input = psc::fuzz::scratch_output("input.sqlite");
  if (!psc::fuzz::write_file(input, data, size)) return 0;
  psc::ImportOptions options;
  options.input = input;
  options.output = psc::fuzz::scratch_output("nsys.pstrace");
  try {
    psc::nsys_sqlite_importer().read(options);
  } catch (const psc::InputError&) {
  }
  return 0;
}

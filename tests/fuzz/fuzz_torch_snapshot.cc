// libFuzzer target: the pickle subset reader and the torch-snapshot importer
// behind it. Anything that is not a snapshot must be an InputError (exit 2),
// never a crash, a hang, or code named by the file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exchange/export_formats.h"
#include "exchange/torch_snapshot/pickle_reader.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    psc::pickle::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const psc::pickle::ParseError&) {
  }
  psc::fuzz::MemFile file(data, size);
  if (!file.ok()) return 0;
  psc::ImportOptions options;
  options.input = file.path();
  options.output = psc::fuzz::scratch_output("snapshot.pstrace");
  try {
    psc::torch_snapshot_importer().read(options);
  } catch (const psc::InputError&) {
  }
  return 0;
}

// The recorder library (libpeakscope_preload.so) this CLI preloads: where
// `record` finds it, and what it has, read from its dynamic symbol table
// without loading it (`peakscope version`).
//
// Looked for, in order: $PEAKSCOPE_PRELOAD; beside the executable (the build
// folder, build/); ../lib beside the executable's folder (an installed
// <prefix>/bin/peakscope finds <prefix>/lib/libpeakscope_preload.so). The
// executable is /proc/self/exe, so a symlink to the CLI finds the library of
// the prefix it points into.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psc::cli {

inline constexpr const char kPreloadLibraryName[] = "libpeakscope_preload.so";
inline constexpr const char kPreloadEnv[] = "PEAKSCOPE_PRELOAD";

struct PreloadSearch {
  std::string path;                // the library, its real path; empty when none was found
  std::vector<std::string> tried;  // every path looked at, in order (with the found one)
  bool from_environment = false;   // named by $PEAKSCOPE_PRELOAD
};

// The running executable (/proc/self/exe), "" when unknown.
std::string executable_path();
// Its folder, "." when unknown.
std::string executable_directory();

// Where the recorder library is, and where it was looked for.
PreloadSearch find_preload_library();

// One line: "cannot find libpeakscope_preload.so (looked at A, B; set
// PEAKSCOPE_PRELOAD)", or "PEAKSCOPE_PRELOAD=X: ..." when the variable names a
// file that is not there.
std::string preload_not_found(const PreloadSearch& search);

// The global symbols an ELF shared library defines, from its .dynsym, with
// a reader for their bytes; nothing of the library runs.
class ElfSymbols {
 public:
  // Throws std::runtime_error naming the file when it is not a 64-bit
  // little-endian ELF file with a dynamic symbol table.
  explicit ElfSymbols(const std::string& path);

  bool defines(const std::string& name) const;
  // The 4 bytes at a defined object symbol's address (a `const uint32_t`
  // the library exports); nullopt when the symbol is not there or has no bytes
  // in the file.
  std::optional<uint32_t> u32(const std::string& name) const;

 private:
  struct Symbol {
    std::string name;
    uint64_t value = 0;
    uint64_t size = 0;
    uint16_t section = 0;
  };
  struct Section {
    uint32_t type = 0;
    uint64_t address = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  const Symbol* find(const std::string& name) const;

  std::string path_;
  std::string bytes_;
  std::vector<Symbol> symbols_;
  std::vector<Section> sections_;
};

}  // namespace psc::cli

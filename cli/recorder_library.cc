#include "cli/recorder_library.h"

#include <elf.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace psc::cli {

std::string executable_path() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  buffer[n] = 0;
  return buffer;
}

std::string executable_directory() {
  const std::string path = executable_path();
  if (path.empty()) return ".";
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

PreloadSearch find_preload_library() {
  PreloadSearch search;
  std::vector<std::string> candidates;
  if (const char* named = getenv(kPreloadEnv); named && *named) {
    search.from_environment = true;
    candidates.push_back(named);
  } else {
    const std::string dir = executable_directory();
    candidates = {dir + "/" + kPreloadLibraryName, dir + "/../lib/" + kPreloadLibraryName};
  }
  for (const std::string& candidate : candidates) {
    search.tried.push_back(candidate);
    char resolved[PATH_MAX];
    if (access(candidate.c_str(), R_OK) == 0 && realpath(candidate.c_str(), resolved)) {
      search.path = resolved;
      break;
    }
  }
  return search;
}

std::string preload_not_found(const PreloadSearch& search) {
  if (search.from_environment) return std::string(kPreloadEnv) + "=" + search.tried.front() + ": no such readable file";
  std::string tried;
  for (const std::string& path : search.tried) tried += (tried.empty() ? "" : ", ") + path;
  return std::string("cannot find ") + kPreloadLibraryName + " (looked at " + tried + "; set " + kPreloadEnv + ")";
}

namespace {

template <typename T>
T read_at(const std::string& bytes, uint64_t offset, const std::string& path) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
    throw std::runtime_error(path + ": not a whole ELF file (a table runs past its end)");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

}  // namespace

ElfSymbols::ElfSymbols(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::ostringstream all;
  all << in.rdbuf();
  bytes_ = all.str();
  const auto header = read_at<Elf64_Ehdr>(bytes_, 0, path);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) throw std::runtime_error(path + ": not an ELF file");
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB)
    throw std::runtime_error(path + ": not a 64-bit little-endian ELF file");
  if (header.e_shentsize != sizeof(Elf64_Shdr)) throw std::runtime_error(path + ": unexpected section header size");
  std::vector<Elf64_Shdr> sections;
  for (uint16_t i = 0; i < header.e_shnum; ++i)
    sections.push_back(read_at<Elf64_Shdr>(bytes_, header.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), path));
  bool found = false;
  for (const Elf64_Shdr& table : sections) {
    if (table.sh_type != SHT_DYNSYM) continue;
    found = true;
    if (table.sh_link >= sections.size()) throw std::runtime_error(path + ": .dynsym names no string table");
    const Elf64_Shdr& strings = sections[table.sh_link];
    for (uint64_t at = sizeof(Elf64_Sym); at + sizeof(Elf64_Sym) <= table.sh_size; at += sizeof(Elf64_Sym)) {
      const auto sym = read_at<Elf64_Sym>(bytes_, table.sh_offset + at, path);
      const unsigned binding = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || (binding != STB_GLOBAL && binding != STB_WEAK)) continue;
      if (sym.st_name >= strings.sh_size || strings.sh_offset + sym.st_name >= bytes_.size()) continue;
      const char* name = bytes_.data() + strings.sh_offset + sym.st_name;
      const size_t room =
          std::min<uint64_t>(strings.sh_size - sym.st_name, bytes_.size() - strings.sh_offset - sym.st_name);
      symbols_.push_back(Symbol{std::string(name, strnlen(name, room)), sym.st_value, sym.st_size, sym.st_shndx});
    }
  }
  if (!found) throw std::runtime_error(path + ": no dynamic symbol table");
  // A symbol's bytes are read through the section it sits in.
  for (const Elf64_Shdr& s : sections) sections_.push_back(Section{s.sh_type, s.sh_addr, s.sh_offset, s.sh_size});
}

const ElfSymbols::Symbol* ElfSymbols::find(const std::string& name) const {
  for (const Symbol& s : symbols_)
    if (s.name == name) return &s;
  return nullptr;
}

bool ElfSymbols::defines(const std::string& name) const { return find(name) != nullptr; }

std::optional<uint32_t> ElfSymbols::u32(const std::string& name) const {
  const Symbol* s = find(name);
  if (!s || s->size != sizeof(uint32_t) || s->section >= sections_.size()) return std::nullopt;
  const Section& section = sections_[s->section];
  if (section.type != SHT_PROGBITS || section.size < sizeof(uint32_t) || s->value < section.address ||
      s->value - section.address > section.size - sizeof(uint32_t))
    return std::nullopt;
  return read_at<uint32_t>(bytes_, section.offset + (s->value - section.address), path_);
}

}  // namespace psc::cli

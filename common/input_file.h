// Files the reading half takes from users (traces, plans, calibrations, saved
// reports, snapshots, databases): opened without blocking and refused unless
// they are regular files, so a FIFO cannot hang the open and /dev/zero cannot
// be read until memory runs out. One place, so every command words the
// refusal the same way; callers add the path (and their own exception type).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace psc {

class InputFile {
 public:
  // Never throws: check ok(), else error() says why in one line, e.g.
  // "cannot read: No such file or directory", "not a regular file (a FIFO)".
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  uint64_t size() const { return size_; }  // at open time
  // The size now (a file still being written grows); size() when fstat fails.
  uint64_t current_size() const;
  // Reads up to n bytes at offset, retrying short reads; returns how many were read.
  size_t read_at(uint64_t offset, void* out, size_t n) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string error_;
};

// Reads a whole regular file of at most max_bytes into *text. On failure
// returns false with a one-line reason in *error; `what` names the kind of
// file in the size refusal ("N bytes is larger than any <what> this reads").
bool read_input_file(const std::string& path, size_t max_bytes, const char* what, std::string* text,
                     std::string* error);

}  // namespace psc

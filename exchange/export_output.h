// The output side of every exporter: a buffered file that is written under a
// temporary name and renamed into place only when the export succeeded, so a
// failed or interrupted export never leaves a truncated file that looks whole.
// An output that exists and is not a plain file (/dev/null, /dev/stdout, a
// FIFO, a symbolic link) is written in place instead: renaming over it would
// replace the device or the link itself.
// Memory: one fixed buffer, whatever the output size.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace psc {

// True when `path` does not exist or is a regular file (not a link to one):
// then a finished output may be renamed onto it.
bool replaceable_by_rename(const std::string& path);

class OutputFile {
 public:
  // Throws std::runtime_error naming the path when it cannot be created.
  // buffer_bytes 0: what goes through write() is not buffered (for an output
  // a library writes at temp_path(), where this object only commits).
  explicit OutputFile(std::string path, size_t buffer_bytes = 1u << 20);
  ~OutputFile();  // removes the temporary file unless commit() ran
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n) {
    if (n <= buffer_.size() - used_) {
      std::memcpy(buffer_.data() + used_, data, n);
      used_ += n;
      return;
    }
    write_slow(data, n);
  }
  void write(std::string_view s) { write(s.data(), s.size()); }
  void put(char c) { write(&c, 1); }

  uint64_t bytes_written() const { return flushed_ + used_; }
  const std::string& path() const { return path_; }
  // Where the bytes are going until commit(): exporters that hand the path to
  // a library (SQLite) write there directly.
  const std::string& temp_path() const { return temp_path_; }

  // Flushes, closes and renames into place. Throws on any write error.
  void commit();

 private:
  void flush();
  void write_through(const char* p, size_t n);
  void write_slow(const void* data, size_t n);

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::vector<char> buffer_;
  size_t used_ = 0;
  uint64_t flushed_ = 0;
  bool committed_ = false;
  bool in_place_ = false;  // writing the output itself, not a temporary beside it
};

// An OutputFile created on first use: an export builds its first trace's
// model before it creates the output, so an input that is not a trace leaves
// the output untouched (even one written in place, such as a link).
class LazyOutput {
 public:
  explicit LazyOutput(std::string path) : path_(std::move(path)) {}
  OutputFile& get() {
    if (!file_) file_.emplace(path_);
    return *file_;
  }
  void commit() { get().commit(); }

 private:
  std::string path_;
  std::optional<OutputFile> file_;
};

}  // namespace psc

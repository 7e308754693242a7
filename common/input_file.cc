#include "common/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace psc {
namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer;
// it is refused by fstat just below. On a regular file the flag changes nothing.
InputFile::InputFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error_ = fmt::format("cannot read: {}", std::strerror(errno));
    return;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error_ = fmt::format("cannot read: {}", std::strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    error_ = "cannot read: Is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    error_ = fmt::format("not a regular file ({})", file_type_name(st.st_mode));
  }
  if (!error_.empty()) {
    ::close(fd);
    return;
  }
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t InputFile::current_size() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return size_;
  return static_cast<uint64_t>(st.st_size);
}

size_t InputFile::read_at(uint64_t offset, void* out, size_t n) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

bool read_input_file(const std::string& path, size_t max_bytes, const char* what, std::string* text,
                     std::string* error) {
  InputFile file(path);
  if (!file.ok()) {
    *error = file.error();
    return false;
  }
  if (file.size() > max_bytes) {
    *error =
        fmt::format("{} bytes is larger than any {} this reads ({} MiB at most)", file.size(), what, max_bytes >> 20);
    return false;
  }
  text->resize(static_cast<size_t>(file.size()));
  // A file that shrank while being read: what is there is parsed.
  text->resize(file.read_at(0, text->data(), text->size()));
  return true;
}

}  // namespace psc

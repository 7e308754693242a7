#include "exchange/export_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace psc {

bool replaceable_by_rename(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  return S_ISREG(st.st_mode);
}

OutputFile::OutputFile(std::string path, size_t buffer_bytes)
    : path_(std::move(path)),
      temp_path_(replaceable_by_rename(path_) ? path_ + ".partial" : path_),
      buffer_(buffer_bytes) {
  in_place_ = temp_path_ == path_;
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(path_ + ": cannot create: " + std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !in_place_) std::remove(temp_path_.c_str());
}

void OutputFile::flush() {
  write_through(buffer_.data(), used_);
  flushed_ += used_;
  used_ = 0;
}

void OutputFile::write_through(const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void OutputFile::write_slow(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  if (buffer_.empty()) {
    write_through(p, n);
    flushed_ += n;
    return;
  }
  while (n > 0) {
    if (used_ == buffer_.size()) flush();
    const size_t take = std::min(n, buffer_.size() - used_);
    std::memcpy(buffer_.data() + used_, p, take);
    used_ += take;
    p += take;
    n -= take;
  }
}

void OutputFile::commit() {
  flush();
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw std::runtime_error(path_ + ": close failed: " + std::strerror(errno));
  }
  fd_ = -1;
  if (!in_place_ && std::rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw std::runtime_error(path_ + ": cannot rename " + temp_path_ + " into place: " + std::strerror(errno));
  committed_ = true;
}

}  // namespace psc

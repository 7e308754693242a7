#include "common/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace psc {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw JsonFileError(fmt::format("{}: {}", path, why));
}

// O_NONBLOCK: a FIFO must not hang the open; it is refused just below.
std::string read_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
  struct stat st {};
  std::string text;
  std::string error;
  if (::fstat(fd, &st) != 0) {
    error = fmt::format("cannot read: {}", std::strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    error = "cannot read: Is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    error = "not a regular file";
  } else if (static_cast<uint64_t>(st.st_size) > kMaxJsonFileBytes) {
    error = fmt::format("{} bytes is larger than any JSON file this reads ({} MiB at most)", st.st_size,
                        kMaxJsonFileBytes >> 20);
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error = fmt::format("cannot read: {}", std::strerror(errno));
        break;
      }
      if (n == 0) break;  // shrank while being read: parse what is there
      done += static_cast<size_t>(n);
    }
    text.resize(done);
  }
  ::close(fd);
  if (!error.empty()) fail(path, error);
  return text;
}

}  // namespace

nlohmann::ordered_json read_json_file(const std::string& path) {
  const std::string text = read_regular_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, fmt::format("not valid JSON: {}", e.what()));
  }
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json.dump(2) << '\n';
  out.flush();
  if (!out) fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
}

}  // namespace psc

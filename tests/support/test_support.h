// Scaffolding shared by the unit and integration tests: where the build is,
// a scratch directory removed afterwards, and a temporary trace path.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace psc::test_support {

// The build directory: $PSC_BUILD_DIR (tools/run-tests sets it), else ./build.
inline std::string build_dir() {
  const char* dir = std::getenv("PSC_BUILD_DIR");
  return std::filesystem::absolute(dir ? dir : "build").string();
}

// Runs a shell command; its exit status, 128 + the signal that ended it, or -1.
inline int run_shell(const std::string& command) {
  const int status = std::system(command.c_str());
  if (status == -1) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

// What the end-to-end tests run: the built CLI and recorder library.
inline std::string cli() { return build_dir() + "/peakscope"; }
inline std::string preload() { return build_dir() + "/libpeakscope_preload.so"; }

// Runs a shell command (run_shell), the name the recorder tests read best with.
inline int run(const std::string& command) { return run_shell(command); }

// A whole file's bytes; "" when it cannot be read.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A fresh directory under /tmp, removed with everything in it.
class Scratch {
 public:
  Scratch() {
    char pattern[] = "/tmp/peakscope-test-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  ~Scratch() { std::filesystem::remove_all(dir_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// A trace path unique to this process and call, removed afterwards.
struct TempTrace {
  std::string path;
  explicit TempTrace(const std::string& tag) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("psc_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".pstrace"))
               .string();
  }
  ~TempTrace() { std::remove(path.c_str()); }
};

}  // namespace psc::test_support

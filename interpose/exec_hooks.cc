// The exec family. A successful exec replaces the image without exit
// handlers or destructors, so the trace is written and closed first (marked as
// ended by exec, runtime/trace_sink.cc); the new image, preloaded again, writes a
// file of its own (<stem>.e<N>.pstrace: trace files are never overwritten).
// When exec returns, it failed: recording goes on in the same file.
//
// glibc's exec functions call its internal execve, never these, so each exec
// passes here once. posix_spawn and system() are not interposed: their child
// shares nothing with the recorder until its new image starts one.
#include <dlfcn.h>
#include <stdarg.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/recorder.h"
#include "runtime/sys.h"

extern char** environ;

namespace psc::interpose {
namespace {

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);
using ExecveatFn = int (*)(int, const char*, char* const[], char* const[], int);

struct RealExec {
  ExecveFn execve;
  ExecvFn execv;
  ExecvFn execvp;
  ExecveFn execvpe;
  FexecveFn fexecve;
  ExecveatFn execveat;
};
RealExec g_real;

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

__attribute__((constructor(102))) void resolve_exec_functions() {
  RealExec r{};
  r.execve = next<ExecveFn>("execve");
  r.execv = next<ExecvFn>("execv");
  r.execvp = next<ExecvFn>("execvp");
  r.execvpe = next<ExecveFn>("execvpe");
  r.fexecve = next<FexecveFn>("fexecve");
  r.execveat = next<ExecveatFn>("execveat");  // glibc 2.34 and later
  g_real = r;
}

// Runs one exec call between prepare_exec() and, when it returns, exec_failed().
template <typename Fn, typename... Args>
int run_exec(Fn real, Args... args) {
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  const bool sealed = rt::prepare_exec();
  const int rc = real(args...);
  const int saved_errno = errno;
  if (sealed) rt::exec_failed();
  errno = saved_errno;
  return rc;
}

// The execl family's arguments as an argv array: on the stack when short,
// else in mapped pages (never the heap, which may be hooked). Also reads
// execle's envp, which follows the terminating null.
class ArgList {
 public:
  ArgList(const char* first, va_list args, char*** envp) {
    va_list counting;
    va_copy(counting, args);
    size_t n = 1;
    if (first)
      while (va_arg(counting, char*)) ++n;
    va_end(counting);
    capacity_ = n + 1;
    argv_ = capacity_ <= kOnStack ? stack_ : static_cast<char**>(sys::map_pages(capacity_ * sizeof(char*)));
    mapped_ = argv_ != stack_;
    if (!argv_) return;
    argv_[0] = const_cast<char*>(first);
    for (size_t i = 1; first && i < n; ++i) argv_[i] = va_arg(args, char*);
    if (first) va_arg(args, char*);  // the terminating null
    argv_[first ? n : 0] = nullptr;
    if (envp) *envp = va_arg(args, char**);
  }
  ~ArgList() {
    if (mapped_ && argv_) munmap(argv_, capacity_ * sizeof(char*));
  }
  ArgList(const ArgList&) = delete;
  ArgList& operator=(const ArgList&) = delete;
  char* const* argv() const { return argv_; }

 private:
  static constexpr size_t kOnStack = 256;
  char* stack_[kOnStack];
  char** argv_ = nullptr;
  size_t capacity_ = 0;
  bool mapped_ = false;
};

int no_memory() {
  errno = ENOMEM;
  return -1;
}

}  // namespace
}  // namespace psc::interpose

using psc::interpose::ArgList;
using psc::interpose::g_real;
using psc::interpose::run_exec;

PSC_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return run_exec(g_real.execve, path, argv, envp);
}

PSC_EXPORT int execv(const char* path, char* const argv[]) noexcept { return run_exec(g_real.execv, path, argv); }

PSC_EXPORT int execvp(const char* file, char* const argv[]) noexcept { return run_exec(g_real.execvp, file, argv); }

PSC_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return run_exec(g_real.execvpe, file, argv, envp);
}

PSC_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  return run_exec(g_real.fexecve, fd, argv, envp);
}

PSC_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) noexcept {
  return run_exec(g_real.execveat, dirfd, path, argv, envp, flags);
}

PSC_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  va_list args;
  va_start(args, arg);
  ArgList list(arg, args, nullptr);
  va_end(args);
  if (!list.argv()) return psc::interpose::no_memory();
  return run_exec(g_real.execve, path, list.argv(), static_cast<char* const*>(environ));
}

PSC_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  va_list args;
  va_start(args, arg);
  ArgList list(arg, args, nullptr);
  va_end(args);
  if (!list.argv()) return psc::interpose::no_memory();
  return run_exec(g_real.execvp, file, list.argv());
}

PSC_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  va_list args;
  va_start(args, arg);
  char** envp = nullptr;
  ArgList list(arg, args, &envp);
  va_end(args);
  if (!list.argv()) return psc::interpose::no_memory();
  return run_exec(g_real.execve, path, list.argv(), static_cast<char* const*>(envp));
}

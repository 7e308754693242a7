// Thin system-call helpers for the recorder. Everything here is usable from the
// hot path's slow branches, the writer thread and signal handlers: no libc
// allocation, no stdio, no locks.
#pragma once

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "format/printable.h"

#define PSC_EXPORT extern "C" __attribute__((visibility("default")))
#define PSC_NOINLINE __attribute__((noinline))
#define PSC_LIKELY(x) __builtin_expect(!!(x), 1)
#define PSC_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace psc::sys {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t monotonic_raw_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline pid_t gettid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Anonymous memory that never comes from the (possibly hooked) heap.
inline void* map_pages(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

inline void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Waits while *word == expected, at most timeout_ns.
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

inline void sleep_ns(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Writes everything or returns false. Async-signal-safe.
inline bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Whether n more bytes on stderr stay below RLIMIT_FSIZE. Where stderr is a
// regular file, a write that would end past the limit raises SIGXFSZ, whose
// default action ends the program: a recorder's message must never do that
// (the program may have set the limit low; the message is about just that).
// Such a message is left unsaid.
inline bool stderr_takes(size_t n) {
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return true;
  struct stat st {};
  if (fstat(2, &st) != 0 || !S_ISREG(st.st_mode)) return true;
  const off_t at = lseek(2, 0, SEEK_CUR);
  const uint64_t end = static_cast<uint64_t>(at > st.st_size ? at : st.st_size);  // O_APPEND writes at the end
  return end + n <= limit.rlim_cur;
}

// One message on stderr, whole or not at all (stderr_takes).
inline void write_stderr(const char* text, size_t n) {
  if (stderr_takes(n)) write_all(2, text, n);
}

// Writes a message to stderr without stdio (usable anywhere, even in a signal handler).
inline void say(const char* a, const char* b = "", const char* c = "") {
  auto len = [](const char* s) {
    size_t n = 0;
    while (s[n]) ++n;
    return n;
  };
  if (!stderr_takes(11 + len(a) + len(b) + len(c) + 1)) return;
  write_all(2, "peakscope: ", 11);
  write_all(2, a, len(a));
  write_all(2, b, len(b));
  write_all(2, c, len(c));
  write_all(2, "\n", 1);
}

// What an errno means, without strerror (which may translate, and so allocate).
inline const char* errno_text(int err) {
  switch (err) {
    case ENOSPC: return "No space left on device";
    case EDQUOT: return "Disk quota exceeded";
    case EFBIG: return "File too large";
    case EIO: return "Input/output error";
    case EACCES: return "Permission denied";
    case EPERM: return "Operation not permitted";
    case ENOENT: return "No such file or directory";
    case ENOTDIR: return "Not a directory";
    case EISDIR: return "Is a directory";
    case EROFS: return "Read-only file system";
    case EEXIST: return "File exists";
    case ELOOP: return "Too many levels of symbolic links";
    case ENAMETOOLONG: return "File name too long";
    case EMFILE: return "Too many open files";
    case ENFILE: return "Too many open files in system";
    case EBADF: return "Bad file descriptor";
    case EPIPE: return "Broken pipe";
    case 0: return "short write";
    default: return "error";
  }
}

// Minimal number formatting for messages and file names (no snprintf: it may allocate).
inline char* format_uint(char* out, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *out++ = tmp[--n];
  *out = 0;
  return out;
}

// Appends a path to out (up to end), escaped (format/printable.h): a path
// may hold a newline, which would split the message. Returns the new end.
inline char* put_path(char* out, char* end, const char* path) {
  size_t n = 0;
  while (path[n]) ++n;
  format::put_printable(path, n, [&](const char* text, size_t length) {
    for (size_t i = 0; i < length && out < end; ++i) *out++ = text[i];
  });
  return out;
}

// "peakscope: <what> <path>: <errno text> (errno N)<tail>" on stderr, one
// write; the path escaped (put_path), with room for every byte of the
// longest name the recorder makes (4200) escaped as \xNN.
inline void say_errno(const char* what, const char* path, int err, const char* tail) {
  static char line[4 * 4200 + 600];
  char* o = line;
  char* const end = line + sizeof line - 40;
  auto put = [&](const char* s) {
    while (*s && o < end) *o++ = *s++;
  };
  put("peakscope: ");
  put(what);
  o = put_path(o, end, path);
  put(": ");
  put(errno_text(err));
  put(" (errno ");
  o = format_uint(o, static_cast<uint64_t>(err));
  put(")");
  put(tail);
  *o++ = '\n';
  write_stderr(line, static_cast<size_t>(o - line));
}

}  // namespace psc::sys

// The trace's file name and its creation, for the sink's file
// (runtime/sink_file.h): never a file that exists, never through a symlink,
// and an exec'd image's trace beside the one before it (.e<N>).
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/config.h"
#include "runtime/sink_file.h"
#include "runtime/sys.h"

namespace psc::rt::sink {

char* append(char* out, const char* s) {
  while (*s) *out++ = *s++;
  *out = 0;
  return out;
}

namespace {

// A trace is never overwritten: a taken name moves on to <stem>.e1.pstrace,
// .e2, ... (exec'd images of the same process, stale or planted files), with
// no limit on the number (next_free_generation). Other processes may take
// the number found before this one creates it: it then looks again from
// there, this many times at most.
constexpr int kMaxNameRounds = 64;

// The host's name as a file name part: up to its first dot, letters, digits,
// '-' and '_' only (others become '_'), at most 32 characters.
char* append_host(char* out) {
  char host[65] = {};
  gethostname(host, sizeof host - 1);
  size_t n = 0;
  for (const char* h = host; *h && *h != '.' && n < 32; ++h, ++n) {
    const char c = *h;
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    *out++ = plain ? c : '_';
  }
  if (n == 0) out = append(out, "host");
  *out = 0;
  return out;
}

// Primary process: exactly the configured path. Others (children, ranks):
// the path's stem + "[.r<RANK>].<host>.p<pid>.pstrace", so ranks on several
// machines writing into one shared folder never take each other's names.
void trace_path(char* out, size_t size) {
  const char* base = g_config.output[0] ? g_config.output : "peakscope.pstrace";
  const uint32_t pid = static_cast<uint32_t>(getpid());
  if (g_config.output[0] && pid == g_config.primary_pid) {
    strncpy(out, base, size - 1);
    out[size - 1] = 0;
    return;
  }
  char stem[4096];
  strncpy(stem, base, sizeof stem - 1);
  stem[sizeof stem - 1] = 0;
  size_t n = strlen(stem);
  const char* ext = ".pstrace";
  if (n >= strlen(ext) && strcmp(stem + n - strlen(ext), ext) == 0) stem[n - strlen(ext)] = 0;
  char* o = append(out, stem);
  if (g_config.rank >= 0) {
    o = append(o, ".r");
    o = sys::format_uint(o, static_cast<uint64_t>(g_config.rank));
  }
  o = append(o, ".");
  o = append_host(o);
  o = append(o, ".p");
  o = sys::format_uint(o, pid);
  append(o, ext);
}

int create_exclusive(const char* path) {
  // O_EXCL: never truncate an existing file, never follow a symlink planted
  // at the name (O_NOFOLLOW says so twice); 0600: a trace shows the command
  // line. O_RDWR, not O_WRONLY: the header may have to be rewritten through
  // a mapping (rewrite_header_mapped).
  return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

// path = <stem>.e<generation>.pstrace
void generation_name(char* path, const char* stem, uint64_t generation) {
  char* o = append(path, stem);
  o = append(o, ".e");
  o = sys::format_uint(o, generation);
  append(o, ".pstrace");
}

// Whether anything is at the name (a dangling symlink too). A name that
// cannot be looked at (a folder closed to us) is not taken: creating it says why.
bool name_taken(const char* path) {
  struct stat st {};
  return lstat(path, &st) == 0;
}

// A free generation above `taken` (a number whose name is taken). Each image
// after an exec looks for one afresh, so trying each number in turn costs a
// chain of N execs N*N/2 lookups (and it used to stop at 1000, with EEXIST).
// Instead: taken+1, +2, +4, ... until a name is free, then halving between
// the last taken and the first free: 2*log2(N) lookups. Where the taken
// names are 1..N (one per exec) this finds N+1, the first free; a gap left
// by a removed file may be found instead, which is as good: any free name.
uint64_t next_free_generation(char* path, const char* stem, uint64_t taken) {
  uint64_t step = 1;
  uint64_t free_at = taken + 1;
  for (;;) {
    generation_name(path, stem, free_at);
    if (!name_taken(path) || step >= (1ull << 48)) break;
    taken = free_at;
    step *= 2;
    free_at = taken + step;
  }
  while (free_at - taken > 1) {
    const uint64_t middle = taken + (free_at - taken) / 2;
    generation_name(path, stem, middle);
    if (name_taken(path)) {
      taken = middle;
    } else {
      free_at = middle;
    }
  }
  return free_at;
}

}  // namespace

int create_at_or_next(char* path) {
  int fd = create_exclusive(path);
  if (fd >= 0 || errno != EEXIST) return fd;
  static char stem[4200];
  strncpy(stem, path, sizeof stem - 1);
  stem[sizeof stem - 1] = 0;
  const size_t n = strlen(stem);
  const char* ext = ".pstrace";
  if (n >= strlen(ext) && strcmp(stem + n - strlen(ext), ext) == 0) stem[n - strlen(ext)] = 0;
  uint64_t taken = 0;
  for (int round = 0; round < kMaxNameRounds; ++round) {
    const uint64_t generation = next_free_generation(path, stem, taken);
    generation_name(path, stem, generation);
    fd = create_exclusive(path);
    if (fd >= 0 || errno != EEXIST) return fd;
    taken = generation;  // another process took it meanwhile
  }
  return -1;
}

int create_trace_file(char* path, size_t size) {
  trace_path(path, size);
  return create_at_or_next(path);
}

}  // namespace psc::rt::sink

// The sink's file (runtime/sink_file.h): its descriptor and every write to
// it, the headers, a lost chunk counted and the file cut back to its last
// whole chunk, a trace lost to the program followed by a fresh one.
#include "runtime/sink_file.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/drops.h"
#include "runtime/state.h"
#include "runtime/sys.h"

namespace psc::rt {

uint64_t g_start_realtime_ns = 0;
uint64_t g_start_monotonic_ns = 0;
uint64_t g_start_monotonic_raw_ns = 0;
uint32_t g_parent_pid = 0;

}  // namespace psc::rt

namespace psc::rt::sink {

int g_fd = -1;
bool g_open_failed = false;
bool g_file_created = false;
uint32_t g_file_generation = 0;
format::FileHeader g_header{};
uint64_t g_file_bytes = 0;
bool g_header_pending = false;
bool g_write_failing = false;
bool g_metadata_lost = false;
char g_command[4096];
size_t g_command_length = 0;

namespace {

// Under RLIMIT_FSIZE, chunks of events leave this much below the limit, so
// the closing chunk (drop counts and END, well under 100 bytes) still fits.
constexpr uint64_t kClosingReserve = 256;
// The trace's descriptor sits this far below the soft RLIMIT_NOFILE, the
// limit taken as at most kHighFdCeiling (see place_high).
constexpr uint64_t kHighFdMargin = 64;
constexpr uint64_t kHighFdCeiling = 4096;

dev_t g_file_dev = 0;  // what g_fd must still name: the file created
ino_t g_file_ino = 0;
char g_path[4200];                 // the file's name, for messages
char g_reopen_path[4200];          // its absolute name, to open it again after a chdir
format::RunHeader g_run_header{};  // written right after the header, once
uint64_t g_last_failure_ns = 0;    // an episode ends after a second of writes that work

void read_command_line(char* out, size_t size, size_t* length) {
  *length = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  if (n <= 0) return;
  for (ssize_t i = 0; i < n; ++i)
    if (out[i] == 0) out[i] = ' ';
  while (n > 0 && out[n - 1] == ' ') --n;
  *length = static_cast<size_t>(n);
}

// ---- the descriptor ------------------------------------------------------------
//
// The trace's descriptor is the recorder's, never the program's: programs
// close every descriptor (daemons, close_range), put their own files on fixed
// numbers (a shell's `exec 3>log`, dup2) and open files that take the lowest
// free number. So it is placed high, close-on-exec, and before every write it
// is checked to still name the file the recorder created; when it does not,
// the file is opened again by name, and when that name is no longer our file,
// recording goes on in a fresh one. A chunk never goes to a file the recorder
// did not create, and a number the program may own is never closed.
// What is left: the check and the write are two system calls, so a program
// that puts another file on the descriptor in the microseconds between them
// gets that one chunk; the recorder then finds its file again and writes the
// chunk there too (put_chunk).

// Moves a descriptor of ours out of the program's way, 64 below the soft
// RLIMIT_NOFILE, the limit taken as at most 4096: a higher descriptor only
// makes the kernel's table (and every fork's copy of it) larger, and
// descriptors are handed out lowest first, so what the program opens goes
// around it anyway. Where nothing up there is free, lower halves are tried;
// failing all, fd stays where it is (close-on-exec, and checked before every
// write). Returns the descriptor.
int place_high(int fd) {
  rlimit limit{};
  uint64_t top = kHighFdCeiling;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < top) top = limit.rlim_cur;
  for (uint64_t floor = top > 2 * kHighFdMargin ? top - kHighFdMargin : top / 2; floor > static_cast<uint64_t>(fd);
       floor /= 2) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(floor));
    if (high >= 0) {
      close(fd);
      return high;
    }
  }
  return fd;
}

bool names_our_file(int fd) {
  struct stat st {};
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_file_dev && st.st_ino == g_file_ino;
}

// out = path made absolute, or "" when that name is longer than a path may
// be (PATH_MAX) or the working directory cannot be read: a name cut short
// would open, or create, some other file. Without it the file cannot be
// found again by its name (ensure_own_fd).
void absolute_name(const char* path, char* out, size_t size) {
  constexpr size_t kLongestPath = 4095;  // PATH_MAX less its NUL
  size_t used = 0;
  out[0] = 0;
  if (path[0] != '/') {
    if (!getcwd(out, size - 2)) {
      out[0] = 0;
      return;
    }
    used = strlen(out);
    out[used++] = '/';
  }
  const size_t length = strlen(path);
  if (used + length > kLongestPath || used + length >= size) {
    out[0] = 0;
    return;
  }
  memcpy(out + used, path, length + 1);
}

// A file just created (at g_path) becomes the trace: its identity, its
// absolute name (the program may change directory before it is needed), and
// its descriptor placed high.
void take_file(int fd) {
  struct stat st {};
  fstat(fd, &st);
  g_file_dev = st.st_dev;
  g_file_ino = st.st_ino;
  g_fd = place_high(fd);
  g_file_created = true;
  absolute_name(g_path, g_reopen_path, sizeof g_reopen_path);
}

}  // namespace

void close_own_fd() {
  if (names_our_file(g_fd)) close(g_fd);
  g_fd = -1;
}

namespace {

// Our file cannot be opened by its name any more: removed, renamed, or the
// name now some other file. Recording goes on in a fresh file beside it (the
// same name when free, else the next .e<N>; by its absolute name, so in the
// same folder after a chdir), never in a file the recorder did not create. The events written to the lost file are not
// in the fresh one: they are counted there as write_failed drops (no drop
// reason says "in another file"; one would be a format change) and said on
// stderr with both names. Strings, thread names, the command line and the
// counts are written again (g_metadata_lost). Returns 0 or the errno.
int start_fresh_file() {
  static char lost[sizeof g_path];
  memcpy(lost, g_path, sizeof lost);
  static_assert(sizeof g_path == sizeof g_reopen_path);
  memcpy(g_path, g_reopen_path, sizeof g_path);
  const int fd = create_at_or_next(g_path);
  if (fd < 0) {
    const int err = errno;
    memcpy(g_path, lost, sizeof lost);
    return err;
  }
  take_file(fd);
  ++g_file_generation;
  const uint64_t before = g_events_written - g_chunk_events;  // the chunk being written is in neither yet
  g_events_written = g_chunk_events;
  if (before) count_drop(format::DropReason::kWriteFailed, before);
  g_file_bytes = 0;
  g_header.flags = (g_header.flags & ~format::kHeaderEndedByExec) | format::kHeaderWriteFailed;
  g_header_pending = true;
  g_metadata_lost = true;
  if (!g_config.quiet) {
    static char line[2 * 4 * sizeof g_path + 256];  // each path's bytes may be escaped (\xNN)
    char* o = line;
    char* const end = line + sizeof line - 1;
    const auto put = [&](const char* text) {
      while (*text && o < end) *o++ = *text++;
    };
    char count[24];
    sys::format_uint(count, before);
    put("peakscope: trace file ");
    o = sys::put_path(o, end, lost);
    put(" was closed or replaced by the program and cannot be opened again by its name; recording goes on in ");
    o = sys::put_path(o, end, g_path);
    if (before) {
      put(" (the ");
      put(count);
      put(" events written before are not in it: counted there as write_failed drops)");
    }
    *o++ = '\n';
    sys::write_stderr(line, static_cast<size_t>(o - line));
  }
  return 0;
}

}  // namespace

// Before each write (one fstat per chunk; the events' path never sees it).
// When the descriptor no longer names our file, its number is left to the
// program and the file is opened again by name: not O_APPEND (the header is
// rewritten in place, and pwrite on an O_APPEND descriptor appends), never
// O_TRUNC, and only if what opens is our file (same device and inode).
// Nothing is lost then: the file goes on where it was. Returns 0 or the errno.
int ensure_own_fd() {
  if (names_our_file(g_fd)) return 0;
  g_fd = -1;
  if (!g_reopen_path[0]) return ENAMETOOLONG;  // no name to find it by (absolute_name)
  const int fd = open(g_reopen_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0 && names_our_file(fd)) {
    g_fd = place_high(fd);
    return 0;
  }
  if (fd >= 0) close(fd);
  return start_fresh_file();
}

namespace {

// Writes at an offset; returns 0 or the errno. Never writes past
// RLIMIT_FSIZE: the kernel would answer with SIGXFSZ, whose default action
// ends the application because of the recorder.
int write_at(const void* data, size_t n, uint64_t offset, uint64_t reserve) {
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && offset + n + reserve > limit.rlim_cur)
    return EFBIG;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = pwrite(g_fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return ENOSPC;
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return 0;
}

// Under a file size limit below the header's own size (a program may set
// RLIMIT_FSIZE to anything once the recorder has started), pwrite cannot
// rewrite the header: the kernel checks the limit against where a write
// ends, not against the file's size. The header's bytes are in the file
// already, and a shared mapping changes them without a write (the limit
// governs only how far the file grows): so kHeaderWriteFailed still reaches
// the file when nothing else can. Only when the file holds the whole header:
// touching a mapped page past its end would fault (SIGBUS) in the writer.
int rewrite_header_mapped() {
  struct stat st {};
  if (fstat(g_fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof g_header) return EFBIG;
  void* page = mmap(nullptr, sizeof g_header, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
  if (page == MAP_FAILED) return errno;
  memcpy(page, &g_header, sizeof g_header);
  munmap(page, sizeof g_header);
  return 0;
}

// The header is rewritten in place when its flags change: those bytes are
// already on disk, so this works on a full disk too, and under a file size
// limit below them (rewrite_header_mapped).
int write_header() {
  if (const int err = ensure_own_fd()) return err;
  g_header.header_crc = crc32c(&g_header, offsetof(format::FileHeader, header_crc));
  int err = write_at(&g_header, sizeof g_header, 0, 0);
  if (err == EFBIG && !g_header_pending) err = rewrite_header_mapped();
  if (err == 0 && g_header_pending) err = write_at(&g_run_header, sizeof g_run_header, sizeof g_header, 0);
  if (err == 0 && g_header_pending) {
    g_header_pending = false;
    g_file_bytes = g_header.header_bytes;
  }
  return err;
}

}  // namespace

void set_header_flag(uint32_t flag, bool on) {
  const uint32_t flags = on ? (g_header.flags | flag) : (g_header.flags & ~flag);
  if (flags == g_header.flags) return;
  g_header.flags = flags;
  if (!g_header_pending) write_header();
}

namespace {

// A write failed: the chunk's events are lost and counted, the file is cut
// back to its last whole chunk (a torn chunk would end it for every reader,
// and on a full disk this frees the space the torn part took), and what the
// lost chunk said once for the whole file is said again in the next one.
void chunk_lost(int err) {
  // Only our own file is cut back: the descriptor may name the program's by now.
  if (names_our_file(g_fd) && ftruncate(g_fd, static_cast<off_t>(g_file_bytes)) != 0) {
    // Nothing better to do: the reader stops at the torn chunk and says so.
  }
  count_drop(format::DropReason::kWriteFailed, g_chunk_events);
  g_events_written -= g_chunk_events;
  g_metadata_lost = true;
  set_header_flag(format::kHeaderWriteFailed, true);
  g_last_failure_ns = sys::monotonic_ns();
  if (!g_write_failing) {
    g_write_failing = true;
    if (!g_config.quiet)
      sys::say_errno("cannot write trace file ", g_path, err,
                     "; events are lost until a write succeeds, counted as write_failed drops");
  }
}

}  // namespace

bool open_file() {
  if (g_file_created) return true;
  if (g_open_failed) return false;
  const int fd = create_trace_file(g_path, sizeof g_path);
  if (fd < 0) {
    const int err = errno;
    g_open_failed = true;
    if (!g_config.quiet) sys::say_errno("cannot create trace file ", g_path, err, "; recording stopped");
    g_phase.store(static_cast<uint32_t>(Phase::kStopped), std::memory_order_release);
    return false;
  }
  take_file(fd);
  format::FileHeader& h = g_header;
  h = format::FileHeader{};
  memcpy(h.magic, format::kMagic, sizeof h.magic);
  h.version = format::kVersion;
  h.min_reader_version = format::kMinReaderVersion;
  h.header_bytes = sizeof h + sizeof g_run_header;
  h.pid = static_cast<uint32_t>(getpid());
  h.rank = g_config.rank;
  h.local_rank = g_config.local_rank;
  h.world_size = g_config.world_size > 0 ? g_config.world_size : 0;
  h.record_pid = g_config.primary_pid;
  h.flags = (g_config.host_mode ? format::kHeaderHostMode : 0u) |
            (g_config.reserved_level ? format::kHeaderReservedLevel : 0u) |
            (g_clock_tsc ? format::kHeaderClockTsc : 0u) |
            (g_config.host_mode && g_config.host_min_bytes <= 1 ? format::kHeaderHostEveryBlock : 0u) |
            (g_config.task_rank ? format::kHeaderTaskRank : 0u);
  h.realtime_ns = g_start_realtime_ns;
  h.monotonic_ns = g_start_monotonic_ns;
  h.monotonic_raw_ns = g_start_monotonic_raw_ns;
  h.parent_pid = g_parent_pid;
  gethostname(h.hostname, sizeof h.hostname - 1);
  g_run_header = format::RunHeader{};
  memcpy(g_run_header.run_id, g_config.run_id, sizeof g_run_header.run_id);
  g_run_header.run_id[sizeof g_run_header.run_id - 1] = 0;
  g_run_header.source = g_config.run_id_source;
  g_run_header.crc = crc32c(&g_run_header, offsetof(format::RunHeader, crc));
  g_file_bytes = 0;
  g_header_pending = true;
  if (const int err = write_header()) {
    g_header.flags |= format::kHeaderWriteFailed;  // written with the header, when it is
    if (!g_write_failing && !g_config.quiet)
      sys::say_errno("cannot write trace file ", g_path, err,
                     "; events are lost until a write succeeds, counted as write_failed drops");
    g_write_failing = true;
  }
  read_command_line(g_command, sizeof g_command, &g_command_length);
  if (g_command_length) g_encoder.add_command(g_command, g_command_length);
  return true;
}

namespace {

// One chunk at the end of our file (ensure_own_fd). When the descriptor names
// something else right after the write, the write may have gone there: the
// file is found again and the chunk written once more, at the same place in
// it (writing the same bytes twice there is harmless).
int put_chunk(size_t n, uint64_t reserve) {
  int err = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    err = ensure_own_fd();
    if (err == 0 && g_header_pending) err = write_header();
    if (err == 0) err = write_at(g_chunk, n, g_file_bytes, reserve);
    if (err != 0 || names_our_file(g_fd)) break;
  }
  return err;
}

}  // namespace

int write_chunk(bool last) {
  if (g_encoder.record_count() == 0) return 0;
  int err = -1;
  if (open_file()) {
    const size_t n = g_encoder.finish();
    err = put_chunk(n, last ? 0 : kClosingReserve);
    if (err == 0) {
      g_file_bytes += n;
      // Under a size limit small chunks may still fit between lost big ones:
      // that is one episode, not one per chunk.
      if (g_write_failing && sys::monotonic_ns() - g_last_failure_ns > 1000000000ull) g_write_failing = false;
    } else {
      chunk_lost(err);
    }
  }
  g_chunk_events = 0;
  g_encoder.begin();
  return err;
}

// The closing chunk could not be written (a file size limit below even the
// header, set by the program; a full disk): the file has neither the END
// record nor the drop counts, so how many events it lacks is said here, the
// one place left (the header says that writes failed, rewrite_header_mapped).
void say_close_failed(int err) {
  if (g_config.quiet || err <= 0) return;
  const uint64_t lost = g_drops[static_cast<int>(format::DropReason::kWriteFailed)].load(std::memory_order_relaxed);
  char tail[160];
  char* o = append(tail, "; ");
  if (lost) {
    o = sys::format_uint(o, lost);
    append(o, " events recorded were lost to write errors, a count the file could not take either");
  } else {
    append(o, "no event was lost, but the file has no end mark");
  }
  sys::say_errno("cannot close trace file ", g_path, err, tail);
}

}  // namespace psc::rt::sink

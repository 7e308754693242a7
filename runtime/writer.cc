// The writer thread.
//
// Watermark: events reach the file in global sequence order. Each cycle reads
// the sequence counter G, then, per buffer, `busy` and `head` (see buffers.h).
// A buffer whose producer is idle can hold no unpublished event below G+1; a
// busy one none below its last drained seq + 1. The minimum of those bounds, W,
// is the watermark: merged events below W are written, the rest are held back
// (sorted) for the next cycle. Held-back events are bounded; if they would
// overflow, or on a forced flush, everything is written and any event that
// then lands after a later seq is counted as "late" in the trace.
#include "runtime/writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>

#include "format/chunk_codec.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/drops.h"
#include "runtime/state.h"
#include "runtime/strings.h"
#include "runtime/sys.h"

namespace psc::rt {

uint64_t g_start_realtime_ns = 0;
uint64_t g_start_monotonic_ns = 0;
uint64_t g_start_monotonic_raw_ns = 0;
uint32_t g_parent_pid = 0;

namespace {

constexpr size_t kChunkBytes = 1u << 20;
constexpr uint32_t kStagingEvents = 1u << 20;  // per staging area (drained, held)
constexpr uint32_t kMaxStringIds = 1u << 15;
// Under RLIMIT_FSIZE, chunks of events leave this much below the limit, so
// the closing chunk (drop counts and END, well under 100 bytes) still fits.
constexpr uint64_t kClosingReserve = 256;
// A trace is never overwritten: a taken name moves on to <stem>.e1.pstrace,
// .e2, ... (exec'd images of the same process, stale or planted files), with
// no limit on the number (next_free_generation). Other processes may take
// the number found before this one creates it: it then looks again from
// there, this many times at most.
constexpr int kMaxNameRounds = 64;
// The trace's descriptor sits this far below the soft RLIMIT_NOFILE, the
// limit taken as at most kHighFdCeiling (see place_high).
constexpr uint64_t kHighFdMargin = 64;
constexpr uint64_t kHighFdCeiling = 4096;
// How often an idle writer looks whether it is the process's last thread.
constexpr uint64_t kAloneCheckNs = 200000000ull;

struct Run {
  const Event* next;
  const Event* end;
};

int g_fd = -1;
bool g_open_failed = false;
bool g_file_created = false;  // this process has its file (g_fd may have been lost since: ensure_own_fd)
dev_t g_file_dev = 0;         // what g_fd must still name: the file created
ino_t g_file_ino = 0;
char g_path[4200];                  // the file's name, for messages
char g_reopen_path[4200];           // its absolute name, to open it again after a chdir
uint32_t g_file_generation = 0;     // fresh files started after the file was lost (start_fresh_file)
bool g_after_raw_clone = false;     // this process took the recorder over after a raw clone
uint64_t g_next_alone_check = 0;    // writer thread: see leave_with_the_program
format::FileHeader g_header{};      // as on disk (flags change after the fact)
format::RunHeader g_run_header{};   // written right after it, once
uint64_t g_file_bytes = 0;          // header and whole chunks written: where the next chunk goes
bool g_header_pending = false;      // the header is not on disk yet (its write failed)
bool g_write_failing = false;       // in an episode of failed writes (said once on stderr)
uint64_t g_last_failure_ns = 0;     // an episode ends after a second of writes that work
bool g_metadata_lost = false;       // a lost chunk held strings, thread names or counts
uint64_t g_chunk_events = 0;        // events in the chunk being built
uint64_t g_bytes_before_seal = 0;   // the file before the closing chunk written for an exec
uint32_t g_generation_at_seal = 0;  // ... and which file that was (start_fresh_file)
char g_command[4096];
size_t g_command_length = 0;
pthread_t g_thread;
std::atomic<bool> g_running{false};
std::atomic<bool> g_stop{false};
std::atomic<uint32_t> g_wake{0};  // futex: 1 = work requested
std::atomic<uint32_t> g_flush_requested{0};
std::atomic<uint32_t> g_flush_done{0};                // futex
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;  // held for a whole cycle; fork takes it
constexpr pthread_mutex_t kFreshMutex = PTHREAD_MUTEX_INITIALIZER;

uint8_t* g_chunk = nullptr;
constinit format::ThreadCodecState g_codec_threads[kMaxThreads];
constinit format::ChunkEncoder g_encoder(nullptr, 0, g_codec_threads, kMaxThreads);
Event* g_drained = nullptr;  // this cycle's events, one sorted run per buffer
Event* g_held = nullptr;     // held back from the last cycle, sorted
Event* g_spare = nullptr;    // becomes g_held after the merge
uint32_t g_held_count = 0;
uint8_t* g_string_emitted = nullptr;
uint32_t g_strings_low = 0;  // ids 1..low are all written
uint64_t g_last_seq = 0;
uint64_t g_late = 0;
uint64_t g_events_written = 0;
uint64_t g_drops_written[format::kDropReasonCount];
Run g_runs[kMaxThreads + 1];

// ---- the file --------------------------------------------------------------

char* append(char* out, const char* s) {
  while (*s) *out++ = *s++;
  *out = 0;
  return out;
}

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

// Creates the file at path, or at a free <stem>.e<N>.pstrace when that name
// is taken (next_free_generation). Returns the descriptor (path holds the
// name), or -1 with errno set.
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

// The same at trace_path().
int create_trace_file(char* path, size_t size) {
  trace_path(path, size);
  return create_at_or_next(path);
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

// Closes the trace's descriptor if it still names our file: the number may be
// the program's by now.
void close_own_fd() {
  if (names_our_file(g_fd)) close(g_fd);
  g_fd = -1;
}

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

void set_header_flag(uint32_t flag, bool on) {
  const uint32_t flags = on ? (g_header.flags | flag) : (g_header.flags & ~flag);
  if (flags == g_header.flags) return;
  g_header.flags = flags;
  if (!g_header_pending) write_header();
}

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

// last: the closing chunk, which may use the room kept below a size limit.
// Returns 0, or the errno of a write that failed (-1: no file).
int write_chunk(bool last = false) {
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

// Each add_* retries once in a fresh chunk; a record that cannot fit in an
// empty chunk is impossible by construction (strings are capped at 64 KiB).
template <typename Add>
void add_record(Add add) {
  if (!add()) {
    write_chunk();
    add();
  }
}

// ---- metadata ----------------------------------------------------------------

void emit_strings() {
  const uint32_t allocated = strings_allocated();
  bool contiguous = true;
  for (uint32_t id = g_strings_low + 1; id <= allocated && id <= kMaxStringIds; ++id) {
    if (g_string_emitted[id]) {
      if (contiguous) g_strings_low = id;
      continue;
    }
    size_t length = 0;
    const char* text = string_text(id, &length);
    if (!text) {
      contiguous = false;  // another thread is still publishing it
      continue;
    }
    add_record([&] { return g_encoder.add_string(id, text, length); });
    g_string_emitted[id] = 1;
    if (contiguous) g_strings_low = id;
  }
}

void emit_thread(ThreadBuffer* b) {
  if (b->announced) return;
  const size_t length = strnlen(b->name, sizeof b->name);
  const auto tid = static_cast<uint64_t>(b->os_tid.load(std::memory_order_relaxed));
  add_record([&] { return g_encoder.add_thread(b->index, tid, b->name, length); });
  b->announced = true;
}

void emit_counts(bool force) {
  uint64_t drops[format::kDropReasonCount];
  bool changed = force;
  for (int i = 0; i < format::kDropReasonCount; ++i) {
    drops[i] = g_drops[i].load(std::memory_order_relaxed);
    changed |= drops[i] != g_drops_written[i];
  }
  if (changed) {
    add_record([&] { return g_encoder.add_counts(format::kMetaDrops, drops, format::kDropReasonCount); });
    memcpy(g_drops_written, drops, sizeof drops);
  }
  if (g_late) add_record([&] { return g_encoder.add_counts(format::kMetaLate, &g_late, 1); });
}

// After a lost chunk: strings, thread names, the command line and the drop
// counts it carried are written again (the reader keeps the last of each).
void resend_lost_metadata() {
  if (!g_metadata_lost) return;
  g_metadata_lost = false;
  memset(g_string_emitted, 0, kMaxStringIds + 2);
  g_strings_low = 0;
  const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i)
    if (ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE)) b->announced = false;
  if (g_command_length) add_record([&] { return g_encoder.add_command(g_command, g_command_length); });
  memset(g_drops_written, 0, sizeof g_drops_written);
}

// ---- one cycle -----------------------------------------------------------------

// Copies a buffer's published events into the drained area; returns the
// watermark bound this buffer allows.
uint64_t drain(ThreadBuffer* b, uint64_t global_seq, uint32_t* drained, uint32_t* runs) {
  // Whether the thread has exited must be known before head is read: a thread
  // alive at the read could publish more events and exit before a later check,
  // and freeing its buffer then would lose them. A dead thread publishes nothing.
  const bool exited = thread_exited(b->os_tid.load(std::memory_order_relaxed));
  // A thread that died inside a record will never publish it: not busy.
  const bool busy = b->busy.load(std::memory_order_seq_cst) != 0 && !exited;
  const uint64_t head = b->head.load(std::memory_order_acquire);
  const uint64_t tail = b->tail.load(std::memory_order_relaxed);
  const uint64_t n = std::min<uint64_t>(head - tail, kStagingEvents - *drained);
  if (n) {
    Event* out = g_drained + *drained;
    for (uint64_t i = 0; i < n; ++i) {
      out[i] = b->slots[(tail + i) & b->mask];
      // Deferred events carry CLOCK_MONOTONIC ns already (recorder.h).
      if (!(out[i].flags & kFlagDeferred)) out[i].time_ns = clock_to_ns(out[i].time_ns);
    }
    b->tail.store(tail + n, std::memory_order_release);
    b->floor_seq = std::max(b->floor_seq, out[n - 1].seq);
    g_runs[(*runs)++] = Run{out, out + n};
    *drained += static_cast<uint32_t>(n);
  }
  const bool complete = tail + n == head;
  if (!complete || busy) return b->floor_seq + 1;
  if (exited) {
    // Its thread exited and everything it recorded is out: the buffer can be reused.
    b->announced = false;
    b->floor_seq = global_seq;
    b->state.store(static_cast<uint32_t>(BufferState::kFree), std::memory_order_release);
  }
  return global_seq + 1;
}

// Heap order for the merge: the run whose next event has the lowest seq on top.
struct LaterRun {
  bool operator()(const Run& a, const Run& b) const { return a.next->seq > b.next->seq; }
};

// Returns the watermark used: every event below it is now in the file.
uint64_t cycle(bool force) {
  if (!g_chunk) return 0;
  clock_update();  // before the drain: the events drained were stamped before it
  const uint64_t global_seq = g_seq.load(std::memory_order_seq_cst);
  uint64_t watermark = UINT64_MAX;
  uint32_t drained = 0, runs = 0;
  // A file lost since the last cycle is found again, or a fresh one started,
  // before this cycle's chunk is built: it then carries what the file needs.
  if (g_file_created) ensure_own_fd();
  resend_lost_metadata();
  const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE);
    if (!b || b->state.load(std::memory_order_acquire) != static_cast<uint32_t>(BufferState::kActive)) continue;
    emit_thread(b);  // before drain(), which may hand the buffer to a new thread
    watermark = std::min(watermark, drain(b, global_seq, &drained, &runs));
  }
  // A process that has recorded nothing gets no file (children that only
  // exec, fork-stopped children); metadata waits in the chunk until events come.
  if (!g_file_created && drained == 0 && g_held_count == 0) return watermark;
  if (g_held_count) g_runs[runs++] = Run{g_held, g_held + g_held_count};
  if (force || drained + g_held_count >= kStagingEvents) watermark = UINT64_MAX;

  emit_strings();
  std::make_heap(g_runs, g_runs + runs, LaterRun{});
  uint32_t kept = 0;
  while (runs) {
    std::pop_heap(g_runs, g_runs + runs, LaterRun{});
    Run& r = g_runs[runs - 1];
    // Threads' runs interleave in long stretches (a thread holds a core for
    // its time slice): every event of this run below the next run's head goes
    // out before the heap is touched again, not one pop and push per event.
    const uint64_t limit = runs > 1 ? g_runs[0].next->seq : UINT64_MAX;
    do {
      const Event& e = *r.next++;
      if (e.seq < watermark) {
        if (e.seq < g_last_seq) ++g_late;
        g_last_seq = std::max(g_last_seq, e.seq);
        add_record([&] { return g_encoder.add_event(e); });
        ++g_events_written;
        ++g_chunk_events;
      } else {
        g_spare[kept++] = e;
      }
    } while (r.next != r.end && r.next->seq < limit);
    if (r.next == r.end) {
      --runs;
    } else {
      std::push_heap(g_runs, g_runs + runs, LaterRun{});
    }
  }
  std::swap(g_held, g_spare);
  g_held_count = kept;
  emit_counts(false);
  write_chunk();
  return watermark;
}

// Forced cycles first give busy producers a moment to finish their record, so
// a flush rarely has to write out of order.
void forced_cycle() {
  for (int tries = 0; tries < 20; ++tries) {
    bool any_busy = false;
    const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < count && !any_busy; ++i) {
      ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE);
      any_busy = b && b->busy.load(std::memory_order_seq_cst) != 0;
    }
    if (!any_busy) break;
    sys::sleep_ns(50000);
  }
  cycle(true);
}

// A flush must put every event recorded before it was asked for in the file.
// Normal cycles do that once the watermark passes the sequence number read
// now, without writing anything out of order; only a producer stuck in the
// middle of a record for 100 ms makes it force the rest out.
void flush_cycle() {
  const uint64_t target = g_seq.load(std::memory_order_seq_cst);
  const uint64_t deadline = sys::monotonic_ns() + 100000000ull;
  while (cycle(false) <= target) {
    if (sys::monotonic_ns() > deadline) {
      forced_cycle();
      return;
    }
    sys::sleep_ns(50000);
  }
}

// Whether this thread is all that is left of the process (/proc/self/stat:
// the main thread's state, field 3, and the number of threads, field 20). A
// main thread that has ended while others live is a zombie until they all
// have, and still counted.
bool only_thread_left() {
  char text[1024];
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = 0;
  const char* p = strrchr(text, ')');  // the command name before it may hold anything
  if (!p || p[1] != ' ') return false;
  const bool main_ended = p[2] == 'Z';
  // Field 2 ends at ')'; each space after it starts the next field.
  for (int field = 2; *p && field < 20; ++p)
    if (*p == ' ') ++field;
  uint32_t threads = 0;
  while (*p >= '0' && *p <= '9') threads = threads * 10 + static_cast<uint32_t>(*p++ - '0');
  return threads == 1 || (threads == 2 && main_ended);
}

// Nothing but this thread is left: the program's last thread ended without
// ending the process. glibc's last thread calls exit(0), but counts this one
// among the living (main left through pthread_exit, the others returned); a
// raw clone child's function returns into the end of its thread alone. Left
// so, this thread would keep the process alive for ever, deaf to the signals
// it blocks. It does what the last thread would have done: exit(0), which
// runs the program's atexit handlers and destructors, the recorder's last;
// after a raw clone (whose handlers are the parent's copies, never run by
// such a child) it closes the trace and ends on its own, and the process
// with the status its main thread left.
void write_closing_chunk();

void leave_with_the_program() {
  if (!g_after_raw_clone) exit(0);
  pthread_mutex_lock(&g_mutex);
  forced_cycle();
  if (g_file_created) write_closing_chunk();
  close_own_fd();
  g_file_created = false;
  g_phase.store(static_cast<uint32_t>(Phase::kStopped), std::memory_order_release);
  syscall(SYS_exit, 0);
}

void* writer_main(void*) {
  t_state.internal = true;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the application's threads
  pthread_setname_np(pthread_self(), "peakscope-wr");
  const uint64_t interval = uint64_t{g_config.flush_ms} * 1000000ull;
  while (!g_stop.load(std::memory_order_acquire)) {
    if (g_wake.exchange(0, std::memory_order_acq_rel) == 0) sys::futex_wait(&g_wake, 0, interval);
    g_wake.store(0, std::memory_order_relaxed);
    const uint32_t requested = g_flush_requested.load(std::memory_order_acquire);
    pthread_mutex_lock(&g_mutex);
    const uint64_t written = g_events_written;
    if (requested != g_flush_done.load(std::memory_order_relaxed)) {
      flush_cycle();
    } else {
      cycle(false);
    }
    const bool idle = g_events_written == written;
    pthread_mutex_unlock(&g_mutex);
    // A process whose threads are gone records nothing: looked at when idle.
    if (idle && !g_stop.load(std::memory_order_acquire)) {
      const uint64_t now = sys::monotonic_ns();
      if (now >= g_next_alone_check) {
        g_next_alone_check = now + kAloneCheckNs;
        if (only_thread_left()) leave_with_the_program();
      }
    }
    if (requested != g_flush_done.load(std::memory_order_relaxed)) {
      g_flush_done.store(requested, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flush_done), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
              0);
    }
  }
  return nullptr;
}

bool allocate_areas() {
  if (g_chunk) return true;
  g_chunk = static_cast<uint8_t*>(sys::map_pages(kChunkBytes + sizeof(format::ChunkHeader)));
  g_drained = static_cast<Event*>(sys::map_pages(sizeof(Event) * kStagingEvents));
  g_held = static_cast<Event*>(sys::map_pages(sizeof(Event) * kStagingEvents));
  g_spare = static_cast<Event*>(sys::map_pages(sizeof(Event) * kStagingEvents));
  g_string_emitted = static_cast<uint8_t*>(sys::map_pages(kMaxStringIds + 2));
  if (!g_chunk || !g_drained || !g_held || !g_spare || !g_string_emitted) {
    g_chunk = nullptr;
    return false;
  }
  g_encoder = format::ChunkEncoder(g_chunk, kChunkBytes + sizeof(format::ChunkHeader), g_codec_threads, kMaxThreads);
  g_encoder.begin();
  return true;
}

bool spawn_thread() {
  g_stop.store(false, std::memory_order_relaxed);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  const bool ok = pthread_create(&g_thread, &attr, writer_main, nullptr) == 0;
  pthread_attr_destroy(&attr);
  g_running.store(ok, std::memory_order_release);
  return ok;
}

bool is_primary() { return g_config.output[0] && static_cast<uint32_t>(getpid()) == g_config.primary_pid; }

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

// The drop counts and the END record, in a chunk of their own.
// A fresh file started during its write (start_fresh_file) gets its own.
void write_closing_chunk() {
  int err = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint32_t generation = g_file_generation;
    resend_lost_metadata();
    emit_counts(true);
    add_record([&] { return g_encoder.add_counts(format::kMetaEnd, &g_events_written, 1); });
    err = write_chunk(/*last=*/true);
    if (generation == g_file_generation) break;
  }
  say_close_failed(err);
}

}  // namespace

bool writer_running() { return g_running.load(std::memory_order_acquire); }

bool on_writer_thread() { return g_running.load(std::memory_order_relaxed) && pthread_equal(pthread_self(), g_thread); }

bool writer_start() {
  if (g_running.load(std::memory_order_acquire)) return true;
  if (g_config.output_length >= sizeof g_config.output) {
    // Cut to fit, it would name another file (trunc/abc.ps for trunc/abc.pstrace).
    if (!g_config.quiet) {
      char length[24];
      sys::format_uint(length, g_config.output_length);
      sys::say("PEAKSCOPE_OUTPUT is ", length,
               " bytes long, over the 4095 a path may have (PATH_MAX); recording stopped, no trace written");
    }
    return false;
  }
  if (!allocate_areas()) {
    if (!g_config.quiet) sys::say("cannot map writer memory; recording stopped");
    return false;
  }
  // The primary process always leaves a trace, even an empty one.
  if (is_primary() && !open_file()) return false;
  return spawn_thread();
}

void writer_nudge() {
  if (g_wake.load(std::memory_order_relaxed) == 0 && g_wake.exchange(1, std::memory_order_acq_rel) == 0)
    sys::futex_wake(&g_wake);
}

bool writer_flush(uint64_t timeout_ns) {
  if (!g_running.load(std::memory_order_acquire) || on_writer_thread()) return false;
  const uint32_t ticket = g_flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  g_wake.store(1, std::memory_order_release);
  sys::futex_wake(&g_wake);
  const uint64_t deadline = sys::monotonic_ns() + timeout_ns;
  for (;;) {
    const uint32_t done = g_flush_done.load(std::memory_order_acquire);
    if (static_cast<int32_t>(done - ticket) >= 0) return true;
    const uint64_t now = sys::monotonic_ns();
    if (now >= deadline) return false;
    sys::futex_wait(&g_flush_done, done, std::min<uint64_t>(deadline - now, 10000000ull));
  }
}

void writer_stop() {
  if (g_running.exchange(false, std::memory_order_acq_rel)) {
    g_stop.store(true, std::memory_order_release);
    g_wake.store(1, std::memory_order_release);
    sys::futex_wake(&g_wake);
    pthread_join(g_thread, nullptr);
  }
  if (!g_chunk) return;
  pthread_mutex_lock(&g_mutex);
  forced_cycle();
  if (g_file_created || is_primary()) write_closing_chunk();
  close_own_fd();
  g_file_created = false;
  pthread_mutex_unlock(&g_mutex);
}

bool writer_seal_for_exec() {
  if (!g_running.load(std::memory_order_acquire) || on_writer_thread()) return false;
  pthread_mutex_lock(&g_mutex);
  flush_cycle();
  if (g_file_created) {
    g_bytes_before_seal = g_file_bytes;
    g_generation_at_seal = g_file_generation;
    write_closing_chunk();
    set_header_flag(format::kHeaderEndedByExec, true);
  }
  return true;  // g_mutex stays held: nothing more goes into this file
}

void writer_unseal_after_failed_exec() {
  if (g_file_created && (g_header.flags & format::kHeaderEndedByExec)) {
    // The process goes on: take the closing chunk back and keep appending
    // (unless the file was lost meanwhile: a fresh one has no such chunk).
    if (ensure_own_fd() == 0 && g_file_generation == g_generation_at_seal &&
        ftruncate(g_fd, static_cast<off_t>(g_bytes_before_seal)) == 0)
      g_file_bytes = g_bytes_before_seal;
    set_header_flag(format::kHeaderEndedByExec, false);
    memset(g_drops_written, 0, sizeof g_drops_written);  // the counts went with that chunk
  }
  pthread_mutex_unlock(&g_mutex);
}

void writer_before_fork() { pthread_mutex_lock(&g_mutex); }
void writer_after_fork_parent() { pthread_mutex_unlock(&g_mutex); }

void writer_after_fork_child(bool raw_clone) {
  // The parent's writer thread does not exist here and its file is not ours.
  // The lock is fresh: after a raw clone no fork handler took it, and the
  // parent's writer may have held it at that moment.
  g_mutex = kFreshMutex;
  close_own_fd();
  g_file_created = false;
  g_file_generation = 0;
  g_after_raw_clone = raw_clone;
  g_next_alone_check = 0;
  g_open_failed = false;
  g_file_bytes = 0;
  g_header_pending = false;
  g_write_failing = false;
  g_metadata_lost = false;
  g_chunk_events = 0;
  g_command_length = 0;
  g_running.store(false, std::memory_order_relaxed);
  g_held_count = 0;
  g_strings_low = 0;
  g_last_seq = 0;
  g_late = 0;
  g_events_written = 0;
  memset(g_drops_written, 0, sizeof g_drops_written);
  if (g_string_emitted) memset(g_string_emitted, 0, kMaxStringIds + 2);
  g_flush_requested.store(0, std::memory_order_relaxed);
  g_flush_done.store(0, std::memory_order_relaxed);
  g_wake.store(0, std::memory_order_relaxed);
  if (g_chunk) g_encoder.begin();
}

bool writer_restart_in_child() { return spawn_thread(); }

}  // namespace psc::rt

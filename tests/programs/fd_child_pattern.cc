// A program that does to its descriptors and its children what daemons,
// shells and launchers do, with counts known exactly, for the tests that the
// recorder never damages the program it records (tests/end_to_end/recorder/recorder_lifecycle_test.cc).
// Every "pair" is one posix_memalign of 4096 bytes and its free: two events
// under `peakscope record --host`. Usage:
//   fd_child_pattern own-log LOG LINES      close fds 3..63 (where a trace's descriptor would be), open LOG
//                                           (it gets fd 3) and write LINES lines to it, 20 pairs and 1 ms apart
//   fd_child_pattern exec3 LOG LINES        `exec 3>LOG` as a shell does it (open, dup2 onto fd 3), then LINES
//                                           lines to fd 3, 20 pairs and 1 ms apart
//   fd_child_pattern dup2 FILE LINES        dup2 FILE (opened for writing: a log, or /dev/null) onto the trace's
//                                           descriptor (found in /proc/self/fd), then LINES lines to that
//                                           descriptor, 20 pairs and 1 ms apart
//   fd_child_pattern daemon LOG LINES       close every fd from 3 to the soft RLIMIT_NOFILE, open LOG (fd 3),
//                                           LINES lines, 20 pairs and 1 ms apart
//   fd_child_pattern close-range PAIRS      PAIRS pairs, close_range(3, ~0U, 0), PAIRS pairs
//   fd_child_pattern close-loop PAIRS       PAIRS pairs, close() of fds 3..1023, PAIRS pairs
//   fd_child_pattern clone HOW PAIRS        PAIRS pairs; a child from clone(SIGCHLD) (no fork handlers run)
//                                           makes PAIRS pairs and leaves: HOW = exit (exit(0)), _exit
//                                           (_exit(0)), return (glibc's clone() on a stack of its own, the
//                                           child function returns 0), or thread (a thread of the child's
//                                           makes its PAIRS pairs first, then the child's own thread PAIRS
//                                           more, then exit(0)); the parent waits, then PAIRS pairs
//   fd_child_pattern vfork PAIRS HOW        PAIRS pairs; vfork; the child's execv fails and it calls exit(0);
//                                           then 3*PAIRS pairs; the parent leaves by HOW: exit or return
//   fd_child_pattern replace PAIRS          PAIRS pairs, 50 ms; the trace's file removed and a file of the program's
//                                           ("mine\n") put at its name, every fd from 3 closed; PAIRS pairs
//   fd_child_pattern main-exits PAIRS       a thread makes PAIRS pairs and prints "done" (stdout, buffered);
//                                           main leaves first, through pthread_exit
//   fd_child_pattern trace-fd               one pair, 100 ms, then prints the trace's descriptor and whether
//                                           it is close-on-exec
// Exit status 0, or 30..49 naming the check that failed.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

void pairs(long count) {
  for (long i = 0; i < count; ++i) {
    void* p = nullptr;
    if (posix_memalign(&p, 64, 4096) != 0) abort();
    memset(p, 1, 64);
    free(p);
  }
}

long g_thread_pairs = 0;

void* thread_pairs(void*) {
  pairs(g_thread_pairs);
  return nullptr;
}

// LINES lines "line <i>\n" to fd, each after 20 pairs and a millisecond (the
// writer, at PEAKSCOPE_FLUSH_MS=1, writes chunks in between).
int lines_to(int fd, int lines) {
  for (int i = 1; i <= lines; ++i) {
    pairs(20);
    char line[32];
    const int n = snprintf(line, sizeof line, "line %d\n", i);
    if (write(fd, line, static_cast<size_t>(n)) != n) return 31;
    usleep(1000);
  }
  return 0;
}

int open_log(const char* path) { return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644); }

int own_log(const char* path, int lines) {
  for (int fd = 3; fd < 64; ++fd) close(fd);
  const int fd = open_log(path);
  if (fd != 3) return 32;
  const int rc = lines_to(fd, lines);
  close(fd);
  return rc;
}

int exec3(const char* path, int lines) {
  const int fd = open_log(path);
  if (fd < 0 || (fd != 3 && (dup2(fd, 3) != 3 || close(fd) != 0))) return 33;
  const int rc = lines_to(3, lines);
  close(3);
  return rc;
}

// The descriptor whose link names a .pstrace file, or -1; its target in path.
int trace_fd(char* path = nullptr, size_t size = 0) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char link[300], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%s", entry->d_name);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 8) continue;
    target[n] = 0;
    if (strcmp(target + n - 8, ".pstrace") != 0) continue;
    found = atoi(entry->d_name);
    if (path) snprintf(path, size, "%s", target);
  }
  closedir(dir);
  return found;
}

int replace_trace(long count) {
  pairs(count);
  usleep(50000);  // the writer puts them in the file
  char path[4096];
  if (trace_fd(path, sizeof path) < 0 || unlink(path) != 0) return 43;
  const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0 || write(fd, "mine\n", 5) != 5 || close(fd) != 0) return 44;
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) return 37;
  pairs(count);
  return 0;
}

void* thread_outlives_main(void*) {
  usleep(100000);  // main has left by now
  pairs(g_thread_pairs);
  printf("done\n");  // buffered: written by the exit that ends the process
  return nullptr;
}

int main_exits(long count) {
  g_thread_pairs = count;
  pthread_t thread;
  if (pthread_create(&thread, nullptr, thread_outlives_main, nullptr) != 0) return 45;
  pthread_exit(nullptr);
}

int show_trace_fd() {
  pairs(1);
  usleep(100000);  // a child's file is made at its first events
  const int fd = trace_fd();
  if (fd < 0) return 34;
  const int flags = fcntl(fd, F_GETFD);
  printf("%d %d\n", fd, flags >= 0 && (flags & FD_CLOEXEC) ? 1 : 0);
  return 0;
}

int dup2_over_trace(const char* path, int lines) {
  const int trace = trace_fd();
  if (trace < 0) return 34;
  const int fd = strcmp(path, "/dev/null") == 0 ? open(path, O_WRONLY) : open_log(path);
  if (fd < 0 || dup2(fd, trace) != trace) return 35;
  close(fd);
  const int rc = lines_to(trace, lines);
  close(trace);
  return rc;
}

int daemon_like(const char* path, int lines) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 36;
  for (rlim_t fd = 3; fd < limit.rlim_cur && fd < (1u << 20); ++fd) close(static_cast<int>(fd));
  return own_log(path, lines);
}

int close_range_all(long count) {
  pairs(count);
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) return 37;
  pairs(count);
  return 0;
}

int close_loop(long count) {
  pairs(count);
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  pairs(count);
  return 0;
}

long g_child_pairs = 0;

int child_returns(void*) {
  pairs(g_child_pairs);
  return 0;
}

int wait_ok(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 38;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 39;
}

int clone_child(const char* how, long count) {
  pairs(count);
  pid_t pid;
  if (strcmp(how, "return") == 0) {
    const size_t stack_bytes = 1 << 20;
    void* stack = mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) return 40;
    g_child_pairs = count;
    pid = clone(child_returns, static_cast<char*>(stack) + stack_bytes, SIGCHLD, nullptr);
  } else {
    // The raw system call: no fork handlers, the child goes on on a copy of this stack.
    pid = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (pid == 0) {
      if (strcmp(how, "thread") == 0) {
        g_thread_pairs = count;
        pthread_t thread;
        if (pthread_create(&thread, nullptr, thread_pairs, nullptr) != 0 || pthread_join(thread, nullptr) != 0)
          _exit(46);
      }
      pairs(count);
      if (strcmp(how, "_exit") == 0) _exit(0);
      exit(0);
    }
  }
  if (pid < 0) return 41;
  if (const int rc = wait_ok(pid)) return rc;
  pairs(count);
  return 0;
}

int vfork_child(long count, const char* how) {
  pairs(count);
  const pid_t pid = vfork();
  if (pid == 0) {
    char* argv[] = {const_cast<char*>("missing"), nullptr};
    execv("/nonexistent/peakscope-test-program", argv);
    exit(0);  // what many programs do, though only _exit is allowed here
  }
  if (pid < 0) return 42;
  if (const int rc = wait_ok(pid)) return rc;
  pairs(3 * count);
  if (strcmp(how, "exit") == 0) exit(0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "own-log")) return own_log(argv[2], atoi(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "exec3")) return exec3(argv[2], atoi(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "dup2")) return dup2_over_trace(argv[2], atoi(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "daemon")) return daemon_like(argv[2], atoi(argv[3]));
  if (argc >= 3 && !strcmp(argv[1], "close-range")) return close_range_all(atol(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "close-loop")) return close_loop(atol(argv[2]));
  if (argc >= 4 && !strcmp(argv[1], "clone")) return clone_child(argv[2], atol(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "vfork")) return vfork_child(atol(argv[2]), argv[3]);
  if (argc >= 3 && !strcmp(argv[1], "replace")) return replace_trace(atol(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "main-exits")) return main_exits(atol(argv[2]));
  if (argc >= 2 && !strcmp(argv[1], "trace-fd")) return show_trace_fd();
  fprintf(stderr,
          "usage: fd_child_pattern "
          "own-log|exec3|dup2|daemon|close-range|close-loop|clone|vfork|replace|main-exits|trace-fd ...\n");
  return 2;
}

// A program whose host allocation pattern is known exactly, for the recorder's
// exactness tests. Usage:
//   host_pattern peak BLOCKS BYTES        allocate BLOCKS blocks, free them all: peak = BLOCKS*BYTES
//   host_pattern pairs THREADS PAIRS BYTES   each thread: PAIRS posix_memalign/free pairs
//   host_pattern hold BLOCKS BYTES        allocate, print "ready", then sleep (to be killed)
//   host_pattern fork BLOCKS BYTES        allocate in parent, fork a child that allocates, both free
//   host_pattern ranges                   C API ranges around allocations (needs the preload)
//   host_pattern abort BLOCKS BYTES       allocate, then abort()
//   host_pattern realloc                  posix_memalign 100000, realloc to 300000, free; one small block
//   host_pattern exit CODE                exit with CODE
//   host_pattern churn WAVES THREADS PAIRS  WAVES times: start THREADS threads that
//                                           each make PAIRS pairs and exit at once
//   host_pattern exec VARIANT PAIRS       PAIRS pairs of 4096 bytes, then exec itself as
//                                         "peak 3 100000" through VARIANT (execv, execve, execvp,
//                                         execvpe, execl, execle, execlp, fexecve)
//   host_pattern exec-fails PAIRS         PAIRS pairs, a failing execv, PAIRS more pairs
//   host_pattern fork-exec BLOCKS BYTES   fork; the child allocates BLOCKS blocks, then execs /bin/true
//   host_pattern raise SIGNAL BLOCKS BYTES  allocate BLOCKS blocks, then raise(SIGNAL) at once
//   host_pattern handlers                 handlers and SIG_IGN set after the recorder's, read back,
//                                         then SIGUSR1 back to SIG_DFL and raised (exit 128+10)
//   host_pattern fsize LIMIT PAIRS        RLIMIT_FSIZE = LIMIT bytes (SIGXFSZ left at its default),
//                                         then PAIRS pairs of 4096 bytes
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace {

void* aligned_block(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, bytes) != 0) abort();
  memset(p, 1, 64);
  return p;
}

int peak(int blocks, size_t bytes) {
  std::vector<void*> live;
  for (int i = 0; i < blocks; ++i) live.push_back(aligned_block(bytes));
  for (void* p : live) free(p);
  return 0;
}

int pairs(int threads, long count, size_t bytes) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([=] {
      for (long i = 0; i < count; ++i) {
        void* p = aligned_block(bytes);
        free(p);
      }
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}

int churn(int waves, int threads, long count) {
  for (int w = 0; w < waves; ++w) pairs(threads, count, 4096);
  return 0;
}

int hold(int blocks, size_t bytes) {
  for (int i = 0; i < blocks; ++i) aligned_block(bytes);
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

int forking(int blocks, size_t bytes) {
  std::vector<void*> live;
  for (int i = 0; i < blocks; ++i) live.push_back(aligned_block(bytes));
  // A helper thread that keeps allocating while we fork, like a data loader's pin thread.
  volatile bool stop = false;
  std::thread busy([&] {
    while (!stop) free(aligned_block(bytes));
  });
  std::vector<pid_t> children;
  for (int c = 0; c < 4; ++c) {
    pid_t pid = fork();
    if (pid == 0) {
      void* mine = aligned_block(bytes * 2);
      free(mine);
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
  }
  stop = true;
  busy.join();
  for (void* p : live) free(p);
  return 0;
}

// Execs this program again as "peak 3 100000" through one member of the family.
int exec_self(const char* variant, long count) {
  pairs(1, count, 4096);
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 6;
  self[n] = 0;
  char* argv[] = {self, const_cast<char*>("peak"), const_cast<char*>("3"), const_cast<char*>("100000"), nullptr};
  if (!strcmp(variant, "execv")) execv(self, argv);
  if (!strcmp(variant, "execve")) execve(self, argv, environ);
  if (!strcmp(variant, "execvp")) execvp(self, argv);
  if (!strcmp(variant, "execvpe")) execvpe(self, argv, environ);
  if (!strcmp(variant, "execl")) execl(self, self, "peak", "3", "100000", static_cast<char*>(nullptr));
  if (!strcmp(variant, "execle")) execle(self, self, "peak", "3", "100000", static_cast<char*>(nullptr), environ);
  if (!strcmp(variant, "execlp")) execlp(self, self, "peak", "3", "100000", static_cast<char*>(nullptr));
  if (!strcmp(variant, "fexecve")) {
    const int fd = open(self, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) fexecve(fd, argv, environ);
  }
  perror("host_pattern: exec");
  return 7;
}

int exec_fails(long count) {
  pairs(1, count, 4096);
  char* argv[] = {const_cast<char*>("missing"), nullptr};
  if (execv("/nonexistent/peakscope-test-program", argv) == 0 || errno != ENOENT) return 8;
  pairs(1, count, 4096);
  return 0;
}

int fork_exec(int blocks, size_t bytes) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < blocks; ++i) aligned_block(bytes);
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 9;
}

int raise_signal(int sig, int blocks, size_t bytes) {
  for (int i = 0; i < blocks; ++i) aligned_block(bytes);
  raise(sig);
  printf("survived\n");
  return 0;
}

volatile sig_atomic_t g_usr1 = 0;
void on_usr1(int) { g_usr1 = g_usr1 + 1; }

// Exit codes 20..25 name the check that failed.
int handlers() {
  if (signal(SIGUSR1, on_usr1) != SIG_DFL) return 20;  // the recorder's handler is not shown
  raise(SIGUSR1);
  if (g_usr1 != 1) return 21;  // the application's handler ran, and nothing else
  struct sigaction current {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != on_usr1) return 22;
  if (sigaction(SIGINT, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return 23;
  if (signal(SIGUSR2, SIG_IGN) != SIG_DFL) return 24;
  raise(SIGUSR2);  // ignored: the process goes on
  for (int i = 0; i < 7; ++i) aligned_block(100000);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  if (sigaction(SIGUSR1, &dfl, nullptr) != 0) return 25;
  raise(SIGUSR1);  // default action: the process ends, after the recorder flushed
  return 26;
}

int file_size_limit(uint64_t limit, long count) {
  rlimit r{limit, limit};
  if (setrlimit(RLIMIT_FSIZE, &r) != 0) return 10;
  return pairs(1, count, 4096);
}

using PushFn = void (*)(const char*);
using PopFn = void (*)();
using MarkFn = void (*)(const char*, const char*);

int ranges() {
  auto push = reinterpret_cast<PushFn>(dlsym(RTLD_DEFAULT, "psc_range_push"));
  auto pop = reinterpret_cast<PopFn>(dlsym(RTLD_DEFAULT, "psc_range_pop"));
  auto mark = reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "psc_mark"));
  if (!push || !pop || !mark) {
    fprintf(stderr, "host_pattern: the peakscope C API is not loaded\n");
    return 4;
  }
  void* outside = aligned_block(1 << 20);
  push("wave");
  mark("wave", "{\"tokens\": 16, \"slots\": [\"a\"], \"groups\": 1, \"cold\": true}");
  push("forward/layer.0");
  void* a = aligned_block(100000);
  pop();
  push("backward/layer.0");
  void* b = aligned_block(200000);
  free(a);
  pop();
  pop();
  free(b);
  free(outside);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "peak")) return peak(atoi(argv[2]), strtoull(argv[3], nullptr, 10));
  if (argc >= 5 && !strcmp(argv[1], "pairs"))
    return pairs(atoi(argv[2]), atol(argv[3]), strtoull(argv[4], nullptr, 10));
  if (argc >= 4 && !strcmp(argv[1], "hold")) return hold(atoi(argv[2]), strtoull(argv[3], nullptr, 10));
  if (argc >= 4 && !strcmp(argv[1], "fork")) return forking(atoi(argv[2]), strtoull(argv[3], nullptr, 10));
  if (argc >= 2 && !strcmp(argv[1], "ranges")) return ranges();
  if (argc >= 2 && !strcmp(argv[1], "realloc")) {
    void* p = aligned_block(100000);
    void* q = realloc(p, 300000);
    if (!q) return 5;
    free(q);
    free(aligned_block(1000));  // below the 4 KiB default threshold: not recorded
    return 0;
  }
  if (argc >= 3 && !strcmp(argv[1], "exit")) return atoi(argv[2]);
  if (argc >= 5 && !strcmp(argv[1], "churn")) return churn(atoi(argv[2]), atoi(argv[3]), atol(argv[4]));
  if (argc >= 4 && !strcmp(argv[1], "exec")) return exec_self(argv[2], atol(argv[3]));
  if (argc >= 3 && !strcmp(argv[1], "exec-fails")) return exec_fails(atol(argv[2]));
  if (argc >= 4 && !strcmp(argv[1], "fork-exec")) return fork_exec(atoi(argv[2]), strtoull(argv[3], nullptr, 10));
  if (argc >= 5 && !strcmp(argv[1], "raise"))
    return raise_signal(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], nullptr, 10));
  if (argc >= 2 && !strcmp(argv[1], "handlers")) return handlers();
  if (argc >= 4 && !strcmp(argv[1], "fsize")) return file_size_limit(strtoull(argv[2], nullptr, 10), atol(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "abort")) {
    for (int i = 0; i < atoi(argv[2]); ++i) aligned_block(strtoull(argv[3], nullptr, 10));
    abort();
  }
  fprintf(stderr, "usage: host_pattern peak|pairs|hold|fork|ranges|abort ...\n");
  return 2;
}

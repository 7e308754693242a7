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
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  if (argc >= 4 && !strcmp(argv[1], "abort")) {
    for (int i = 0; i < atoi(argv[2]); ++i) aligned_block(strtoull(argv[3], nullptr, 10));
    abort();
  }
  fprintf(stderr, "usage: host_pattern peak|pairs|hold|fork|ranges|abort ...\n");
  return 2;
}

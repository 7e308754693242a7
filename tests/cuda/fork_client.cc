// fork before CUDA is initialised (a DataLoader worker, a launcher): parent and
// child each initialise CUDA and allocate, the child after the fork. Each must
// get its own trace and its own double's counts; neither may see the other's.
//
//   fork_client        parent allocates 1111111 bytes, child 2222222 bytes
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "tests/cuda/client.h"

namespace {

void work(size_t bytes) {
  void* p;
  void* q;
  CLIENT_CHECK(cudaMalloc(&p, bytes));
  CLIENT_CHECK(cudaMallocHost(&q, 4096));
  CLIENT_CHECK(cudaFreeHost(q));
  CLIENT_CHECK(cudaFree(p));
}

}  // namespace

int main() {
  const pid_t child = fork();
  if (child < 0) return 5;
  if (child == 0) {
    work(2222222);
    std::exit(0);  // exit, not _exit: the doubles write their counts from destructors
  }
  work(1111111);
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("child %d\n", static_cast<int>(child));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 6;
}

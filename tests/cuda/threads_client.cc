// Threads, devices and streams: thread t works on device t % 2 with its own
// stream, inside its own range "thread.<t>", and allocates sizes that name it
// (t * 1000 + k + 1 bytes per cudaMalloc, and 2 MiB + the same for
// cudaMallocAsync on its stream), so a test can check each event's thread,
// device, stream and range.
//
//   threads_client THREADS ROUNDS
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/cuda/client.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: threads_client THREADS ROUNDS\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const int rounds = std::atoi(argv[2]);
  std::vector<uintptr_t> streams(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([t, rounds, &streams] {
      CLIENT_CHECK(cudaSetDevice(t % 2));
      cudaStream_t stream;
      CLIENT_CHECK(cudaStreamCreate(&stream));
      streams[t] = reinterpret_cast<uintptr_t>(stream);
      const std::string range = "thread." + std::to_string(t);
      client::range_push(range.c_str());
      for (int k = 0; k < rounds; ++k) {
        const size_t bytes = static_cast<size_t>(t) * 1000 + static_cast<size_t>(k) + 1;
        void *p, *q;
        CLIENT_CHECK(cudaMalloc(&p, bytes));
        CLIENT_CHECK(cudaMallocAsync(&q, (2u << 20) + bytes, stream));
        CLIENT_CHECK(cudaFreeAsync(q, stream));
        CLIENT_CHECK(cudaFree(p));
      }
      client::range_pop();
      CLIENT_CHECK(cudaStreamSynchronize(stream));
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) std::printf("stream.%d %llu\n", t, static_cast<unsigned long long>(streams[t]));
  return 0;
}

// A program with three NVTX instances — its own and those of the two client
// libraries — whose NVTX calls are known exactly, for the injection tests.
// Usage:
//   nvtx_program sequence            one thread, every kind of call (the test lists them);
//                                    prints "depths: ..." (push/pop return values)
//   nvtx_program threads N ROUNDS    N threads nest ranges in two instances and start
//                                    ranges that the next thread ends
//   nvtx_program names               names CUDA devices, contexts, streams and events
//                                    through a fourth instance (the test lists them)
//   nvtx_program concurrent-init N   N threads make their first NVTX calls at the same
//                                    moment into all three instances, then call
//                                    InitializeInjectionNvtx2 again for the program's
//                                    instance (must be idempotent); prints "reinit: ..."
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "tests/nvtx/nvtx_clients.h"

namespace {

std::string depths;
void note(int depth) { depths += " " + std::to_string(depth); }

int sequence() {
  note(nvtxRangePushA("wave"));
  nvtxMarkA("wave {\"tokens\": 7, \"cold\": true}");
  note(core_push("forward/layer.0"));
  note(core_push_wide(L"backward/layer.1 \u00fcn\u00ef"));
  note(core_pop());
  note(core_push_ex("recompute/layer.2", 5));
  note(core_pop());
  nvtxNameCategoryA(1, "category one");  // not recorded; a chained tool still gets it

  nvtxDomainHandle_t nccl = domains_create("NCCL");
  nvtxStringHandle_t all_reduce = domains_register(nccl, "AllReduce");
  note(domains_push_registered(nccl, all_reduce));
  domains_mark(nccl, "sync");
  note(domains_pop(nccl));
  nvtxStringHandle_t layer5 = domains_register(nullptr, "forward/layer.5");
  note(domains_push_registered(nullptr, layer5));
  note(domains_pop(nullptr));
  domains_name_category(nccl, 2, "collectives");

  nvtxRangeId_t loss = core_start("head/loss");
  nvtxRangeEnd(loss);  // ended through another instance
  nvtxRangeId_t collective = domains_start_registered(nccl, all_reduce);
  domains_end(nccl, collective);
  core_mark_int("step", 42);
  core_mark_double("lr", -0.25);
  core_mark_wide(L"\u00e9t\u00e9");

  nvtxDomainHandle_t omega = domains_create_wide(L"\u03a9mega");
  nvtxStringHandle_t wide = domains_register_wide(omega, L"w\u00ee");
  note(domains_push(omega, "x"));
  note(domains_push_registered(omega, wide));
  note(domains_pop(omega));
  note(domains_pop(omega));

  nvtxEventAttributes_t nameless{};
  nameless.version = NVTX_VERSION;
  nameless.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  note(nvtxRangePushEx(&nameless));
  note(nvtxRangePop());
  note(core_pop());
  note(nvtxRangePop());
  domains_destroy(omega);
  printf("depths:%s\n", depths.c_str());
  if (loss == collective || loss == 0 || collective == 0) return 3;
  return 0;
}

int names() {
  cuda_name_stream(0x7000, "copy stream");
  cuda_name_cu_stream(0x7100, "nccl \"ring\"");
  cuda_name_cu_context(0x5000, "main context");
  cuda_name_device(0, "gpu0");
  cuda_name_cu_device(1, "gpu1");
  cuda_name_stream_wide(0x7200, L"fl\u00fc\u00df");
  cuda_name_cu_context_wide(0x5100, L"ctx \u03a9");
  cuda_name_cu_event_wide(0x9000, L"ev");
  cuda_name_event(0x9100, "done");
  cuda_name_cu_stream(0xffff800012345678ull, "high");  // above INT64_MAX: written unsigned
  nvtxMarkA("names.done");
  return 0;
}

int threads(int count, int rounds) {
  nvtxDomainHandle_t nccl = domains_create("NCCL");
  std::vector<std::vector<nvtxRangeId_t>> started(count, std::vector<nvtxRangeId_t>(rounds));
  std::barrier sync(count);
  std::vector<std::thread> workers;
  for (int t = 0; t < count; ++t) {
    workers.emplace_back([&, t] {
      const std::string layer = "forward/layer." + std::to_string(t);
      const std::string prefetch = "prefetch." + std::to_string(t);
      nvtxStringHandle_t mine = domains_register(nccl, ("t" + std::to_string(t)).c_str());
      for (int r = 0; r < rounds; ++r) {
        core_push(layer.c_str());
        domains_push_registered(nccl, mine);
        nvtxMarkA("tick");
        started[t][r] = core_start(prefetch.c_str());
        domains_pop(nccl);
        core_pop();
      }
      sync.arrive_and_wait();
      // Ranges started on thread t+1 end here.
      for (nvtxRangeId_t id : started[(t + 1) % count]) nvtxRangeEnd(id);
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}

using InitFn = int (*)(const void* (*)(uint32_t));

int concurrent_init(int count) {
  std::barrier start(count);
  std::atomic<int> reinit_sum{0};
  std::atomic<int> reinit_calls{0};
  // The program's own instance's export table, as NVTX would pass it.
  auto* init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "InitializeInjectionNvtx2"));
  std::vector<std::thread> workers;
  for (int t = 0; t < count; ++t) {
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      switch (t % 3) {  // first calls race into different instances
        case 0:
          nvtxRangePushA("init.main");
          nvtxRangePop();
          break;
        case 1:
          core_push("init.core");
          core_pop();
          break;
        default:
          domains_push(nullptr, "init.domains");
          domains_pop(nullptr);
          break;
      }
      nvtxMarkA("all.main");
      core_mark("all.core");
      domains_mark(nullptr, "all.domains");
      start.arrive_and_wait();
      if (init) {
        reinit_sum += init(&NVTX_VERSIONED_IDENTIFIER(nvtxGetExportTable));
        ++reinit_calls;
      }
      start.arrive_and_wait();
      nvtxRangePushA("after.reinit");
      nvtxRangePop();
    });
  }
  for (auto& w : workers) w.join();
  printf("reinit: %d of %d\n", reinit_sum.load(), reinit_calls.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "sequence") == 0) return sequence();
  if (argc >= 2 && strcmp(argv[1], "names") == 0) return names();
  if (argc >= 4 && strcmp(argv[1], "threads") == 0) return threads(atoi(argv[2]), atoi(argv[3]));
  if (argc >= 3 && strcmp(argv[1], "concurrent-init") == 0) return concurrent_init(atoi(argv[2]));
  fprintf(stderr, "usage: nvtx_program sequence | names | threads N ROUNDS | concurrent-init N\n");
  return 2;
}

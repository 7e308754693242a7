// The recorder's configuration, read once from the environment at start-up
// (before the application can change it) into static storage.
#pragma once

#include <cstddef>
#include <cstdint>

namespace psc::rt {

enum class ForkPolicy : uint8_t { kFollow, kStop };
// PEAKSCOPE_CUPTI: kAuto starts the CUPTI backend when the process initialises
// CUDA and libcupti loads, quietly doing without it otherwise; kOn also says on
// stderr when it cannot start; kOff never loads it.
enum class CuptiMode : uint8_t { kAuto, kOn, kOff };

struct Config {
  char output[4096];            // PEAKSCOPE_OUTPUT: trace path ("" = default name in cwd)
  size_t output_length;         // its length: over 4095 (PATH_MAX) it is refused, never cut (writer_start)
  uint32_t primary_pid;         // PEAKSCOPE_PRIMARY_PID: this pid writes exactly `output`
  bool host_mode;               // PEAKSCOPE_HOST=1: record host aligned allocations
  uint64_t host_min_bytes;      // PEAKSCOPE_HOST_MIN_BYTES (default 1: every block)
  bool reserved_level;          // PEAKSCOPE_LEVEL=reserved
  uint32_t buffer_events;       // PEAKSCOPE_BUFFER_EVENTS per thread (power of two, default 16384)
  uint32_t flush_ms;            // PEAKSCOPE_FLUSH_MS (default 50, at most 100)
  uint32_t max_wait_ms;         // PEAKSCOPE_MAX_WAIT_MS a full buffer may block a thread (default 10000)
  ForkPolicy fork_policy;       // PEAKSCOPE_FORK=follow|stop
  bool disabled;                // PEAKSCOPE_DISABLE=1
  bool quiet;                   // PEAKSCOPE_QUIET=1: no messages on stderr
  bool allow_tsc;               // PEAKSCOPE_CLOCK=auto (default) | monotonic: may events stamp the TSC (clock.h)
  CuptiMode cupti;              // PEAKSCOPE_CUPTI=0|1|auto (default auto)
  char cupti_library[4096];     // PEAKSCOPE_CUPTI_LIBRARY: what to dlopen ("" = libcupti.so.13)
  bool cupti_library_too_long;  // over 4095 bytes (PATH_MAX): refused, never cut (cupti_backend.cc)
  // The rank, local rank and world size from the first launcher that names a
  // rank: RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, each with its
  // own local rank and size variables (config.cc, kRankVariables).
  int32_t rank;        // -1 unset
  int32_t local_rank;  // -1 unset
  int32_t world_size;  // -1 unset
  bool task_rank;      // the rank is a task's of srun or mpirun, not RANK (format::kHeaderTaskRank)
  // What the ranks of one job share (format::RunHeader): the first of
  // PEAKSCOPE_RUN_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID[.SLURM_STEP_ID] and
  // MASTER_ADDR:MASTER_PORT (ranked processes only); "" when none is set.
  char run_id[80];
  uint32_t run_id_source;  // format::RunIdSource
};

// Valid after load_config(); zero before.
extern Config g_config;

void load_config();

}  // namespace psc::rt

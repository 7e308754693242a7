#include "runtime/config.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "format/file_format.h"

namespace psc::rt {

Config g_config;

namespace {

uint64_t env_uint(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long parsed = strtoull(v, &end, 10);
  return (end && *end == 0) ? parsed : fallback;
}

int32_t env_int(const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long parsed = strtol(v, &end, 10);
  return (end && *end == 0 && parsed >= 0) ? static_cast<int32_t>(parsed) : -1;
}

bool env_flag(const char* name) {
  const char* v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

uint32_t round_up_pow2(uint64_t v, uint32_t lo, uint32_t hi) {
  uint32_t p = lo;
  while (p < v && p < hi) p <<= 1;
  return p;
}

// Appends text to out[0..size) at *used, always NUL-terminated, cut at size - 1.
void append_id(char* out, size_t size, size_t* used, const char* text) {
  while (*text && *used + 1 < size) out[(*used)++] = *text++;
  out[*used] = 0;
}

// Where a launcher puts a process's rank, its rank on its host and the
// number of ranks.
struct RankVariables {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

// Nearest launcher first: RANK (torchrun, torch.distributed.launch, or a
// script that sets it), Open MPI's mpirun, Hydra's mpiexec (MPICH, Intel MPI;
// Slurm's PMI2 sets PMI_RANK and PMI_SIZE too), then srun. A launcher started
// by another sees the outer one's variables as well (torchrun's workers under
// srun, mpirun's ranks under srun, which hold SLURM_PROCID of their node's
// daemon): the inner launcher's are the process's own.
constexpr RankVariables kRankVariables[] = {
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

// The rank, local rank and world size all from the first launcher whose rank
// variable holds a rank (a number, 0 or more); without one, no rank and
// LOCAL_RANK and WORLD_SIZE as they are.
void set_rank(Config& c) {
  for (const RankVariables& v : kRankVariables) {
    const int32_t rank = env_int(v.rank);
    if (rank < 0) continue;
    c.rank = rank;
    c.local_rank = env_int(v.local_rank);
    c.world_size = env_int(v.world_size);
    c.task_rank = &v != &kRankVariables[0];
    return;
  }
  c.rank = -1;
  c.local_rank = env_int("LOCAL_RANK");
  c.world_size = env_int("WORLD_SIZE");
  c.task_rank = false;
}

// The first of PEAKSCOPE_RUN_ID, TORCHELASTIC_RUN_ID (torchrun's default
// "none" names nothing), SLURM_JOB_ID[.SLURM_STEP_ID] and, for a ranked
// process, MASTER_ADDR:MASTER_PORT.
void set_run_id(Config& c) {
  using format::RunIdSource;
  const auto env = [](const char* name) -> const char* {
    const char* v = getenv(name);
    return v && *v ? v : nullptr;
  };
  size_t used = 0;
  const auto from = [&](RunIdSource source, const char* first, const char* second = nullptr) {
    append_id(c.run_id, sizeof c.run_id, &used, first);
    if (second) {
      append_id(c.run_id, sizeof c.run_id, &used, source == RunIdSource::kSlurm ? "." : ":");
      append_id(c.run_id, sizeof c.run_id, &used, second);
    }
    c.run_id_source = static_cast<uint32_t>(source);
  };
  c.run_id_source = static_cast<uint32_t>(RunIdSource::kNone);
  const char* elastic = env("TORCHELASTIC_RUN_ID");
  if (elastic && strcmp(elastic, "none") == 0) elastic = nullptr;
  if (const char* id = env("PEAKSCOPE_RUN_ID")) {
    from(RunIdSource::kPeakscope, id);
  } else if (elastic) {
    from(RunIdSource::kTorchElastic, elastic);
  } else if (const char* job = env("SLURM_JOB_ID")) {
    from(RunIdSource::kSlurm, job, env("SLURM_STEP_ID"));
  } else if (const char* master = env("MASTER_ADDR"); master && c.rank >= 0) {
    from(RunIdSource::kMaster, master, env("MASTER_PORT"));
  }
}

}  // namespace

void load_config() {
  Config c{};
  if (const char* out = getenv("PEAKSCOPE_OUTPUT")) {
    c.output_length = strlen(out);
    if (c.output_length < sizeof c.output) memcpy(c.output, out, c.output_length + 1);
  }
  c.primary_pid = static_cast<uint32_t>(env_uint("PEAKSCOPE_PRIMARY_PID", 0));
  c.host_mode = env_flag("PEAKSCOPE_HOST");
  c.host_min_bytes = env_uint("PEAKSCOPE_HOST_MIN_BYTES", 1);
  const char* level = getenv("PEAKSCOPE_LEVEL");
  c.reserved_level = level && strcmp(level, "reserved") == 0;
  c.buffer_events = round_up_pow2(env_uint("PEAKSCOPE_BUFFER_EVENTS", 16384), 256, 1u << 22);
  uint64_t flush = env_uint("PEAKSCOPE_FLUSH_MS", 50);
  c.flush_ms = static_cast<uint32_t>(flush == 0 ? 1 : (flush > 100 ? 100 : flush));
  c.max_wait_ms = static_cast<uint32_t>(env_uint("PEAKSCOPE_MAX_WAIT_MS", 10000));
  const char* fork = getenv("PEAKSCOPE_FORK");
  c.fork_policy = (fork && strcmp(fork, "stop") == 0) ? ForkPolicy::kStop : ForkPolicy::kFollow;
  c.disabled = env_flag("PEAKSCOPE_DISABLE");
  c.quiet = env_flag("PEAKSCOPE_QUIET");
  const char* clock = getenv("PEAKSCOPE_CLOCK");
  c.allow_tsc = !(clock && strcmp(clock, "monotonic") == 0);
  const char* cupti = getenv("PEAKSCOPE_CUPTI");
  c.cupti = CuptiMode::kAuto;
  if (cupti && strcmp(cupti, "0") == 0) c.cupti = CuptiMode::kOff;
  if (cupti && strcmp(cupti, "1") == 0) c.cupti = CuptiMode::kOn;
  if (const char* library = getenv("PEAKSCOPE_CUPTI_LIBRARY")) {
    const size_t length = strlen(library);
    c.cupti_library_too_long = length >= sizeof c.cupti_library;
    if (!c.cupti_library_too_long) memcpy(c.cupti_library, library, length + 1);
  }
  set_rank(c);
  set_run_id(c);
  g_config = c;
}

}  // namespace psc::rt

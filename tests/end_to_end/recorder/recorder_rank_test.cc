// The rank a trace's header holds, through the recorder's real loading path:
// RANK, LOCAL_RANK and WORLD_SIZE (torchrun) first, then Open MPI's mpirun,
// Hydra's PMI and srun's variables (runtime/config.cc, kRankVariables). Each
// case runs host_pattern under `peakscope record` in an environment holding
// only the variables it names.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/file_format.h"
#include "tests/support/test_support.h"
#include "traces/reader.h"

namespace psc {
namespace {

namespace fs = std::filesystem;
using test_support::build_dir;
using test_support::Scratch;

// `env` without every variable the recorder reads a rank or a run id from, so
// the environment the tests run in cannot leak into them.
std::string clean_env() {
  return "env -u RANK -u LOCAL_RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_LOCAL_RANK"
         " -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE -u MPI_LOCALRANKID -u SLURM_PROCID -u SLURM_LOCALID"
         " -u SLURM_NTASKS -u SLURM_JOB_ID -u SLURM_STEP_ID -u PEAKSCOPE_RUN_ID -u TORCHELASTIC_RUN_ID"
         " -u MASTER_ADDR -u MASTER_PORT";
}

// The headers of the trace host_pattern leaves under `record` with `assignments` set.
TraceMeta recorded(const Scratch& s, const std::string& assignments) {
  const std::string trace = s.path("t.pstrace");
  const int status = test_support::run_shell(clean_env() + " " + assignments + " " + build_dir() +
                                             "/peakscope record --host --force -o " + trace + " -- " + build_dir() +
                                             "/programs/host_pattern peak 1 4096 2>/dev/null");
  EXPECT_EQ(status, 0) << assignments;
  return read_trace_headers(trace);
}

// The rank, local rank, world size, and whether the header says they are a
// task's of srun or mpirun (kHeaderTaskRank).
struct Stamp {
  int32_t rank, local_rank, world_size;
  bool task = false;
};

Stamp stamp_of(const TraceMeta& meta) {
  return {meta.header.rank, meta.header.local_rank, meta.header.world_size,
          (meta.header.flags & format::kHeaderTaskRank) != 0};
}

void expect_stamp(const Scratch& s, const std::string& assignments, Stamp expected) {
  const Stamp got = stamp_of(recorded(s, assignments));
  EXPECT_EQ(got.rank, expected.rank) << assignments;
  EXPECT_EQ(got.local_rank, expected.local_rank) << assignments;
  EXPECT_EQ(got.world_size, expected.world_size) << assignments;
  EXPECT_EQ(got.task, expected.task) << assignments;
}

const char kSlurm[] = "SLURM_PROCID=5 SLURM_LOCALID=1 SLURM_NTASKS=8";
const char kOpenMpi[] = "OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_SIZE=6";
const char kPmi[] = "PMI_RANK=2 PMI_SIZE=4 MPI_LOCALRANKID=2";
const char kTorch[] = "RANK=7 LOCAL_RANK=3 WORLD_SIZE=16";

TEST(RecorderRank, EachLauncherAloneNamesTheRank) {
  Scratch s;
  expect_stamp(s, kTorch, {7, 3, 16});
  expect_stamp(s, kOpenMpi, {3, 0, 6, true});
  expect_stamp(s, kPmi, {2, 2, 4, true});
  expect_stamp(s, kSlurm, {5, 1, 8, true});
  expect_stamp(s, "PMI_RANK=1 PMI_SIZE=2", {1, -1, 2, true});  // Hydra without its local rank
}

TEST(RecorderRank, TheNearestLauncherWinsWholeRankFirstSlurmLast) {
  Scratch s;
  // torchrun's workers under srun, mpirun under srun, everything at once.
  expect_stamp(s, std::string(kTorch) + " " + kSlurm, {7, 3, 16});
  expect_stamp(s, std::string(kOpenMpi) + " " + kSlurm, {3, 0, 6, true});
  expect_stamp(s, std::string(kPmi) + " " + kSlurm, {2, 2, 4, true});
  expect_stamp(s, std::string(kOpenMpi) + " " + kPmi, {3, 0, 6, true});
  expect_stamp(s, std::string(kTorch) + " " + kOpenMpi + " " + kPmi + " " + kSlurm, {7, 3, 16});
  // The local rank and size come with the rank, never from another launcher.
  expect_stamp(s, std::string("RANK=1 ") + kSlurm, {1, -1, 0});
}

TEST(RecorderRank, ARankThatIsNotANumberIsPassedOver) {
  Scratch s;
  expect_stamp(s, std::string("RANK=x LOCAL_RANK=0 WORLD_SIZE=2 ") + kSlurm, {5, 1, 8, true});
  expect_stamp(s, std::string("OMPI_COMM_WORLD_RANK=-1 ") + kPmi, {2, 2, 4, true});
  expect_stamp(s, "SLURM_PROCID= SLURM_NTASKS=8", {-1, -1, 0});
}

TEST(RecorderRank, WithoutARankLocalRankAndWorldSizeStayAsTheyAre) {
  Scratch s;
  expect_stamp(s, "", {-1, -1, 0});
  expect_stamp(s, "LOCAL_RANK=1 WORLD_SIZE=2", {-1, 1, 2});
  // Another launcher's sizes name nothing without its rank.
  expect_stamp(s, "SLURM_NTASKS=8 OMPI_COMM_WORLD_SIZE=4 PMI_SIZE=2", {-1, -1, 0});
}

TEST(RecorderRank, AScheduledRankTiesTheRunByMasterAddressAndNamesItsFile) {
  Scratch s;
  // A rank from srun is a ranked process: MASTER_ADDR:MASTER_PORT names its run.
  const TraceMeta meta = recorded(s, std::string(kSlurm) + " MASTER_ADDR=10.0.0.1 MASTER_PORT=29500");
  EXPECT_EQ(meta.header.rank, 5);
  EXPECT_EQ(std::string(meta.run.run_id), "10.0.0.1:29500");
  EXPECT_EQ(meta.run.source, static_cast<uint32_t>(format::RunIdSource::kMaster));
  // SLURM_JOB_ID comes before it, as for every rank.
  const TraceMeta job = recorded(s, std::string(kSlurm) + " SLURM_JOB_ID=42 SLURM_STEP_ID=0 MASTER_ADDR=10.0.0.1");
  EXPECT_EQ(std::string(job.run.run_id), "42.0");
  // Preloaded without `record`, the rank's own file carries its rank in its name.
  const int status =
      test_support::run_shell(clean_env() + " " + kOpenMpi + " LD_PRELOAD=" + build_dir() +
                              "/libpeakscope_preload.so PEAKSCOPE_HOST=1 PEAKSCOPE_OUTPUT=" + s.path("mpi.pstrace") +
                              " " + build_dir() + "/programs/host_pattern peak 1 4096 2>/dev/null");
  ASSERT_EQ(status, 0);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(s.dir()))
    if (entry.path().filename().string().rfind("mpi.", 0) == 0) names.push_back(entry.path().filename().string());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind("mpi.r3.", 0), 0u) << names[0];
  EXPECT_EQ(read_trace_headers(s.path(names[0])).header.rank, 3);
}

}  // namespace
}  // namespace psc

// A run is a set of traces: one per rank of a distributed job, plus the
// launcher's own and forked children's (README "Distributed runs"). This
// groups trace files into runs by what their headers say, orders a run's
// members by rank, and puts every member's times on one clock.
//
// Two traces are of one run when
//   - they carry the same run id (format::RunHeader: PEAKSCOPE_RUN_ID,
//     TORCHELASTIC_RUN_ID, SLURM_JOB_ID or MASTER_ADDR:MASTER_PORT), which is
//     what ties ranks on several machines together, or
//   - they were recorded on one host under one `peakscope record` (the same
//     host name and record pid), which ties a launcher to its ranks,
// and transitively so. Traces with neither (written before run identities,
// or recorded without `record` and without a launcher's variables) join the
// only run there is, or stand alone when there are several.
//
// A member ranked as a task of srun or mpirun (format::kHeaderTaskRank) in a
// run whose ranks have RANK is the launcher srun or mpirun started there
// (`srun torchrun`: torchrun's agent, one per node, holds SLURM_PROCID and
// its workers RANK): grouping takes its rank away (settle_task_ranks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/file_format.h"

namespace psc {

struct RunMember {
  std::string path;
  format::FileHeader header{};
  format::RunHeader run{};
};

struct Run {
  // The run id the members share (the first in run order: a rank's before a
  // launcher's), or "<host>:<record pid>" for one recorded on one machine
  // without an id, or "" when nothing names it.
  std::string id;
  std::string id_source;           // format::run_id_source_name, or "peakscope record" / ""
  std::vector<RunMember> members;  // by rank (unranked last), then host, then pid
  std::vector<std::string> hosts;  // distinct host names, in the members' order
};

// The host name a trace's header holds.
std::string host_of(const format::FileHeader& header);

// Whether a trace is one of the run's ranks: RANK was set and it is not a
// process forked from one (the launcher's own trace, and a rank's forked
// children, are members that are not).
inline bool is_rank_trace(const format::FileHeader& header) { return header.rank >= 0 && header.parent_pid == 0; }

// Whether a header's rank is a task's of srun or mpirun (format::kHeaderTaskRank).
inline bool is_task_rank(const format::FileHeader& header) { return (header.flags & format::kHeaderTaskRank) != 0; }

// When some members are ranks by RANK, the members ranked as tasks of srun
// or mpirun are their launchers: their rank, local rank and world size are
// cleared (the flag stays). Returns how many were.
size_t settle_task_ranks(std::vector<RunMember>& members);

// A member whose rank settle_task_ranks took away.
inline bool is_task_launcher(const format::FileHeader& header) { return is_task_rank(header) && header.rank < 0; }

// The run's order: ranked traces first, by rank, then by host and pid.
bool runs_before(const format::FileHeader& x, const format::FileHeader& y);

// Reads each file's headers (TraceError for one that is not a trace) and
// groups them; runs in order of their first member in `paths`.
std::vector<Run> group_runs(const std::vector<std::string>& paths);

// Groups already read members (what group_runs does after reading).
std::vector<Run> group_members(std::vector<RunMember> members);

// "rank 3 (host, pid 1234)", "pid 1234 (host)" for an unranked member.
std::string member_label(const RunMember& member);

// Where a member's CLOCK_MONOTONIC times fall on the run's common clock:
// nanoseconds from `origin_realtime_ns` (CLOCK_REALTIME) by the header's
// pair of clock readings taken together at start. Hosts' realtime clocks
// are as close as their time synchronisation keeps them (NTP: typically
// well under a millisecond on one network).
struct RunClock {
  uint64_t origin_realtime_ns = 0;  // the earliest member's start
  // Offset to add to a member's monotonic time to place it: realtime_ns -
  // monotonic_ns - origin_realtime_ns (may be negative).
  int64_t offset(const format::FileHeader& header) const {
    return static_cast<int64_t>(header.realtime_ns) - static_cast<int64_t>(header.monotonic_ns) -
           static_cast<int64_t>(origin_realtime_ns);
  }
};
RunClock run_clock(const Run& run);

}  // namespace psc

#include "traces/run.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "traces/reader.h"

namespace psc {
namespace {

std::string run_id_of(const RunMember& m) {
  if (m.run.source == static_cast<uint32_t>(format::RunIdSource::kNone)) return "";
  return std::string(m.run.run_id, strnlen(m.run.run_id, sizeof m.run.run_id));
}

// "<host>:<record pid>", or "" for a trace recorded without `peakscope record`.
std::string record_key(const RunMember& m) {
  return m.header.record_pid ? host_of(m.header) + ":" + std::to_string(m.header.record_pid) : "";
}

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), size_t{0}); }
  size_t find(size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<size_t> parent_;
};

void order_members(std::vector<RunMember>& members) {
  std::stable_sort(members.begin(), members.end(),
                   [](const RunMember& x, const RunMember& y) { return runs_before(x.header, y.header); });
}

// The run's id is its first member's in run order that has one: a rank's
// before a launcher's (each host's torchrun agent under srun holds the job's
// SLURM_JOB_ID, its workers the rendezvous id).
Run make_run(std::vector<RunMember> members) {
  Run run;
  settle_task_ranks(members);
  order_members(members);
  for (const RunMember& m : members) {
    const std::string id = run_id_of(m);
    if (!id.empty() && run.id.empty()) {
      run.id = id;
      run.id_source = format::run_id_source_name(m.run.source);
    }
  }
  if (run.id.empty())
    for (const RunMember& m : members)
      if (const std::string key = record_key(m); !key.empty()) {
        run.id = key;
        run.id_source = "peakscope record";
        break;
      }
  for (const RunMember& m : members) {
    const std::string h = host_of(m.header);
    if (std::find(run.hosts.begin(), run.hosts.end(), h) == run.hosts.end()) run.hosts.push_back(h);
  }
  run.members = std::move(members);
  return run;
}

}  // namespace

std::string host_of(const format::FileHeader& header) {
  return std::string(header.hostname, strnlen(header.hostname, sizeof header.hostname));
}

size_t settle_task_ranks(std::vector<RunMember>& members) {
  const bool ranked_by_rank = std::any_of(members.begin(), members.end(), [](const RunMember& m) {
    return is_rank_trace(m.header) && !is_task_rank(m.header);
  });
  if (!ranked_by_rank) return 0;
  size_t settled = 0;
  for (RunMember& m : members) {
    if (!is_task_rank(m.header) || m.header.rank < 0) continue;
    m.header.rank = -1;
    m.header.local_rank = -1;
    m.header.world_size = 0;
    ++settled;
  }
  return settled;
}

bool runs_before(const format::FileHeader& x, const format::FileHeader& y) {
  const bool xr = x.rank >= 0, yr = y.rank >= 0;
  if (xr != yr) return xr;
  if (x.rank != y.rank) return x.rank < y.rank;
  const std::string xh = host_of(x), yh = host_of(y);
  if (xh != yh) return xh < yh;
  return x.pid < y.pid;
}

std::vector<Run> group_members(std::vector<RunMember> members) {
  const size_t n = members.size();
  UnionFind sets(n);
  std::map<std::string, size_t> first_with_id, first_with_record;
  std::vector<bool> keyed(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (const std::string id = run_id_of(members[i]); !id.empty()) {
      keyed[i] = true;
      auto [it, fresh] = first_with_id.emplace(id, i);
      if (!fresh) sets.join(it->second, i);
    }
    if (const std::string key = record_key(members[i]); !key.empty()) {
      keyed[i] = true;
      auto [it, fresh] = first_with_record.emplace(key, i);
      if (!fresh) sets.join(it->second, i);
    }
  }
  // Sets of members that something names; the rest join the only one.
  std::vector<size_t> named_roots;
  for (size_t i = 0; i < n; ++i)
    if (keyed[i] && std::find(named_roots.begin(), named_roots.end(), sets.find(i)) == named_roots.end())
      named_roots.push_back(sets.find(i));
  size_t unnamed_root = n;
  for (size_t i = 0; i < n; ++i) {
    if (keyed[i]) continue;
    if (named_roots.size() == 1) {
      sets.join(named_roots.front(), i);
    } else if (named_roots.empty()) {
      if (unnamed_root == n) unnamed_root = i;
      sets.join(unnamed_root, i);
    }  // several named runs: it stands alone
  }
  std::vector<size_t> roots;
  std::map<size_t, std::vector<RunMember>> by_root;
  for (size_t i = 0; i < n; ++i) {
    const size_t r = sets.find(i);
    if (!by_root.count(r)) roots.push_back(r);
    by_root[r].push_back(std::move(members[i]));
  }
  std::vector<Run> runs;
  for (size_t r : roots) runs.push_back(make_run(std::move(by_root[r])));
  return runs;
}

std::vector<Run> group_runs(const std::vector<std::string>& paths) {
  std::vector<RunMember> members;
  for (const std::string& path : paths) {
    const TraceMeta meta = read_trace_headers(path);
    members.push_back({path, meta.header, meta.run});
  }
  return group_members(std::move(members));
}

std::string member_label(const RunMember& m) {
  const std::string host = host_of(m.header);
  if (m.header.rank >= 0)
    return "rank " + std::to_string(m.header.rank) + " (" + host + ", pid " + std::to_string(m.header.pid) + ")";
  return "pid " + std::to_string(m.header.pid) + " (" + host + ")";
}

RunClock run_clock(const Run& run) {
  RunClock clock;
  bool any = false;
  for (const RunMember& m : run.members) {
    if (!any || m.header.realtime_ns < clock.origin_realtime_ns) clock.origin_realtime_ns = m.header.realtime_ns;
    any = true;
  }
  return clock;
}

}  // namespace psc

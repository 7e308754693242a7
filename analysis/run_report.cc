#include "analysis/run_report.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "analysis/report_json.h"
#include "analysis/report_text.h"
#include "common/bytes.h"
#include "traces/reader.h"

namespace psc {
namespace {

using json = nlohmann::ordered_json;

std::string host_of(const Analysis& a) { return psc::host_of(a.trace.header); }

std::string rank_label(const Analysis& a) {
  return a.trace.header.rank >= 0 ? std::to_string(a.trace.header.rank) : std::string("-");
}

bool is_rank_trace(const Analysis& a) { return psc::is_rank_trace(a.trace.header); }

std::string where(const Analysis& a) {
  if (!a.peak.site.reached) return "(nothing live)";
  return a.peak.site.range.empty() ? "(no range)" : a.peak.site.range;
}

// Measured peak of wave `index` of a member, or -1 when it has no such wave.
int64_t wave_peak(const Analysis& a, size_t index) {
  return index < a.waves.size() ? static_cast<int64_t>(a.waves[index].measured_peak_bytes()) : -1;
}

// The smallest and largest measured peak of wave `index` among `members`;
// {-1, -1} when none has it.
std::pair<int64_t, int64_t> wave_range(const std::vector<const Analysis*>& members, size_t index) {
  int64_t lo = -1, hi = -1;
  for (const Analysis* a : members) {
    const int64_t p = wave_peak(*a, index);
    if (p < 0) continue;
    lo = lo < 0 ? p : std::min(lo, p);
    hi = std::max(hi, p);
  }
  return {lo, hi};
}

// One line per member: its step count and its growing ranges (the busiest
// rank's report below has the full section).
std::string growth_line(const Analysis& a) {
  const StepGrowth& g = a.growth;
  if (g.steps == 0) return "no optimizer steps";
  if (g.window == 0) return "1 step: nothing to compare";
  if (g.growing.empty()) return fmt::format("{} steps, nothing grows", g.steps);
  constexpr size_t kShown = 3;
  std::string out = fmt::format("{} steps, growing:", g.steps);
  for (size_t i = 0; i < g.growing.size() && i < kShown; ++i) {
    const GrowingRange& r = g.growing[i];
    out += fmt::format("{} {} +{}/step", i ? "," : "", r.range.empty() ? "(no range)" : r.range,
                       format_bytes(r.bytes_per_step()));
  }
  if (g.growing.size() > kShown) out += fmt::format(", {} more", g.growing.size() - kShown);
  return out;
}

size_t most_waves(const RunReport& run) {
  size_t n = 0;
  for (const Analysis* a : run.members) n = std::max(n, a->waves.size());
  return n;
}

}  // namespace

RunReport make_run_report(const std::vector<Analysis>& analyses, const Run* grouped_run) {
  RunReport run;
  if (grouped_run) {
    run.id = grouped_run->id;
    run.id_source = grouped_run->id_source;
  }
  for (const Analysis& a : analyses) run.members.push_back(&a);
  std::stable_sort(run.members.begin(), run.members.end(),
                   [](const Analysis* x, const Analysis* y) { return runs_before(x->trace.header, y->trace.header); });
  for (size_t i = 0; i < run.members.size(); ++i) {
    const Analysis& a = *run.members[i];
    if (!a.peak.site.reached) continue;
    if (run.busiest < 0 || a.peak.bytes > run.members[static_cast<size_t>(run.busiest)]->peak.bytes)
      run.busiest = static_cast<int>(i);
  }
  std::set<std::string> hosts;
  std::set<int32_t> ranks, world_sizes, repeated;
  // One process's trace twice (a copy): the same host, pid and start.
  std::map<std::tuple<std::string, uint32_t, uint64_t>, std::string> processes;
  for (const Analysis* a : run.members) {
    hosts.insert(host_of(*a));
    const auto [first, fresh] =
        processes.try_emplace({host_of(*a), a->trace.header.pid, a->trace.header.realtime_ns}, a->trace.path);
    if (!fresh)
      run.notes.push_back(
          fmt::format("{} and {} are one process's trace (pid {}, started together): a copy? Its "
                      "figures are counted twice",
                      first->second, a->trace.path, a->trace.header.pid));
    if (is_rank_trace(*a) && !ranks.insert(a->trace.header.rank).second) repeated.insert(a->trace.header.rank);
    if (a->trace.header.world_size > 0) world_sizes.insert(a->trace.header.world_size);
    if (is_task_launcher(a->trace.header))
      run.notes.push_back(fmt::format(
          "{} is a task of srun or mpirun that launched ranks (as torchrun's agent does): not one of the ranks",
          a->trace.path));
    if (!a->trace.status.complete() || !a->trace.clean_end)
      run.notes.push_back(fmt::format("{} (rank {}) did not end cleanly ({}): read up to where it stopped",
                                      a->trace.path, rank_label(*a), read_state_name(a->trace.status.state)));
  }
  if (world_sizes.size() > 1) run.notes.push_back("the traces disagree on WORLD_SIZE: are they of one run?");
  if (world_sizes.size() == 1) {
    const int32_t world = *world_sizes.begin();
    std::vector<int32_t> missing;
    for (int32_t r = 0; r < world; ++r)
      if (!ranks.count(r)) missing.push_back(r);
    if (!missing.empty())
      run.notes.push_back(fmt::format("WORLD_SIZE is {} but no trace of rank {}", world, fmt::join(missing, ", ")));
  }
  if (hosts.size() > 1) run.notes.push_back(fmt::format("{} hosts: {}", hosts.size(), fmt::join(hosts, ", ")));
  if (!repeated.empty())
    run.notes.push_back(fmt::format("rank {} appears in more than one trace: are two runs mixed? (their run id {})",
                                    fmt::join(repeated, ", "), run.id.empty() ? "is unset" : "is '" + run.id + "'"));
  return run;
}

std::string render_run_text(const RunReport& run, const TextOptions& options) {
  std::string out;
  size_t ranked = 0;
  for (const Analysis* a : run.members) ranked += is_rank_trace(*a);
  out += fmt::format("run        {}{} traces, {} of ranks\n",
                     run.id.empty() ? std::string() : fmt::format("'{}' ({}): ", run.id, run.id_source),
                     run.members.size(), ranked);
  out += fmt::format("  {:>4} {:>8} {:<12} {:<10} {:>10} {:>14} {:>6}  {}\n", "rank", "pid", "host", "status", "events",
                     "peak bytes", "waves", "peak in");
  for (size_t i = 0; i < run.members.size(); ++i) {
    const Analysis& a = *run.members[i];
    std::string status = read_state_name(a.trace.status.state);
    if (a.trace.status.complete() && !a.trace.clean_end) status = "not closed";
    out += fmt::format("{} {:>4} {:>8} {:<12} {:<10} {:>10} {:>14} {:>6}  {}{}\n",
                       static_cast<int>(i) == run.busiest ? "*" : " ", rank_label(a), a.trace.header.pid, host_of(a),
                       status, a.trace.status.events, grouped(a.peak.bytes), a.waves.size(), where(a),
                       a.trace.header.parent_pid ? fmt::format(" (forked from {})", a.trace.header.parent_pid) : "");
  }
  if (run.busiest >= 0) {
    const Analysis& b = *run.members[static_cast<size_t>(run.busiest)];
    uint64_t least = b.peak.bytes;
    const Analysis* least_member = &b;
    for (const Analysis* a : run.members)
      if (is_rank_trace(*a) && a->peak.site.reached && a->peak.bytes < least) {
        least = a->peak.bytes;
        least_member = a;
      }
    out += fmt::format("busiest    rank {} (pid {}): peak {} ({} bytes) in {}", rank_label(b), b.trace.header.pid,
                       format_bytes(b.peak.bytes), b.peak.bytes, where(b));
    if (least_member != &b && least > 0)
      out += fmt::format(
          ", {:.1f}% above the least busy rank {} ({})",
          100.0 * (static_cast<double>(b.peak.bytes) - static_cast<double>(least)) / static_cast<double>(least),
          rank_label(*least_member), format_bytes(least));
    out += "\n";
  } else {
    out += "busiest    none: nothing was ever live in any trace\n";
  }
  for (const std::string& n : run.notes) out += "note       " + n + "\n";
  const size_t waves = most_waves(run);
  if (waves) {
    out += "\nwaves: measured peak (bytes above the wave's baseline) by rank; spread = largest - smallest\n";
    // Columns: the members with waves (not the launcher's own trace).
    std::vector<const Analysis*> columns;
    for (const Analysis* a : run.members)
      if (!a->waves.empty()) columns.push_back(a);
    out += fmt::format("  {:>4}", "wave");
    for (const Analysis* a : columns) out += fmt::format(" {:>14}", "rank " + rank_label(*a));
    out += fmt::format(" {:>14}\n", "spread");
    for (size_t w = 0; w < waves; ++w) {
      out += fmt::format("  {:>4}", w);
      for (const Analysis* a : columns) {
        const int64_t p = wave_peak(*a, w);
        out += fmt::format(" {:>14}", p < 0 ? std::string("-") : grouped(static_cast<uint64_t>(p)));
      }
      const auto [lo, hi] = wave_range(columns, w);
      out += fmt::format(" {:>14}\n", hi < 0 ? std::string("-") : grouped(static_cast<uint64_t>(hi - lo)));
    }
  }
  if (std::any_of(run.members.begin(), run.members.end(), [](const Analysis* a) { return a->growth.steps > 0; })) {
    out += "\ngrowth across optimizer steps by rank (live bytes rising at each of the last step ends)\n";
    for (const Analysis* a : run.members)
      out += fmt::format("  {:>4} {:>8}  {}\n", rank_label(*a), a->trace.header.pid, growth_line(*a));
  }
  if (run.busiest >= 0) {
    const Analysis& b = *run.members[static_cast<size_t>(run.busiest)];
    out += fmt::format("\n== the busiest rank's report: {}\n", b.trace.path);
    out += render_analysis_text(b, options);
  }
  return out;
}

json run_to_json(const RunReport& run) {
  json members = json::array();
  for (const Analysis* a : run.members) {
    json waves = json::array();
    for (const WaveReport& w : a->waves)
      waves.push_back({{"index", w.span.index},
                       {"tokens", w.span.payload.tokens ? json(*w.span.payload.tokens) : json(nullptr)},
                       {"measured_peak_bytes", w.measured_peak_bytes()},
                       {"peak_bytes", w.peak.bytes}});
    members.push_back({{"path", a->trace.path},
                       {"rank", a->trace.header.rank},
                       {"pid", a->trace.header.pid},
                       {"parent_pid", a->trace.header.parent_pid},
                       {"host", host_of(*a)},
                       {"world_size", a->trace.header.world_size},
                       {"status", read_state_name(a->trace.status.state)},
                       {"clean_end", a->trace.clean_end},
                       {"events", a->trace.status.events},
                       {"peak_bytes", a->peak.bytes},
                       {"peak_in", where(*a)},
                       {"waves", waves}});
    // A path that is not UTF-8 loses bytes in "path" (U+FFFD): its exact bytes too.
    if (std::string bytes = path_bytes_hex(a->trace.path); !bytes.empty()) members.back()["path_bytes"] = bytes;
  }
  json spread = json::array();
  for (size_t w = 0; w < most_waves(run); ++w) {
    const auto [lo, hi] = wave_range(run.members, w);
    spread.push_back({{"wave", w}, {"smallest_measured_peak_bytes", lo}, {"largest_measured_peak_bytes", hi}});
  }
  json reports = json::array();
  for (const Analysis* a : run.members) reports.push_back(analysis_to_json(*a));
  const Analysis* b = run.busiest >= 0 ? run.members[static_cast<size_t>(run.busiest)] : nullptr;
  return {{"run",
           {{"id", run.id.empty() ? json(nullptr) : json(run.id)},
            {"id_source", run.id_source.empty() ? json(nullptr) : json(run.id_source)},
            {"traces", run.members.size()},
            {"busiest", b ? json({{"rank", b->trace.header.rank},
                                  {"pid", b->trace.header.pid},
                                  {"path", b->trace.path},
                                  {"peak_bytes", b->peak.bytes}})
                          : json(nullptr)},
            {"members", members},
            {"waves", spread},
            {"notes", run.notes}}},
          {"reports", reports}};
}

}  // namespace psc

#include "exchange/run_window.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "exchange/exporter.h"

namespace psc {
namespace {

// The member's own time of a time on the run's clock (ns after its origin);
// 0 for one before the member's clock starts.
uint64_t own_time(int64_t run_ns, int64_t offset) {
  const int64_t t = run_ns - offset;
  return t > 0 ? static_cast<uint64_t>(t) : 0;
}

std::string waves_text(int32_t n) { return fmt::format("{} wave{}", n, n == 1 ? "" : "s"); }

// The run's stretch of wave N: from the earliest member's push to the latest
// member's pop, ns after the run's earliest event.
void wave_span(const Run& run, const std::vector<WindowProbe>& probes, const RunClock& clock, int32_t wave,
               RunWindow& w) {
  bool any = false;
  int64_t begin = 0, end = 0;
  std::string counts;
  for (size_t i = 0; i < probes.size(); ++i) {
    const WindowProbe& p = probes[i];
    counts += fmt::format("{}{} has {}", i ? ", " : "", member_label(run.members[i]), waves_text(p.waves_seen));
    if (!p.has_wave) continue;
    const int64_t offset = clock.offset(run.members[i].header);
    const int64_t b = static_cast<int64_t>(p.wave_begin_ns) + offset, e = static_cast<int64_t>(p.wave_end_ns) + offset;
    begin = any ? std::min(begin, b) : b;
    end = any ? std::max(end, e) : e;
    any = true;
  }
  if (!any) throw InputError(run_name(run), fmt::format("no member has wave {} ({}; numbered from 0)", wave, counts));
  w.begin_ns = static_cast<uint64_t>(std::max<int64_t>(0, begin - w.zero_ns));
  w.end_ns = static_cast<uint64_t>(std::max<int64_t>(0, end - w.zero_ns));
}

}  // namespace

std::string run_name(const Run& run) { return run.id.empty() ? std::string("the run") : "run '" + run.id + "'"; }

RunWindow write_run_window(const Run& run, const ExportWindow& window, const std::string& stem,
                           std::vector<std::string>& written) {
  if (window.from_ns && window.to_ns && *window.to_ns < *window.from_ns)
    throw InputError(run_name(run), fmt::format("the window ends ({}) before it begins ({})",
                                                format_seconds(*window.to_ns), format_seconds(*window.from_ns)));
  if (window.wave && (window.from_ns || window.to_ns))
    throw InputError(run_name(run), "a window is either --wave or --from/--to, not both");
  const RunClock clock = run_clock(run);
  std::vector<WindowProbe> probes;
  for (const RunMember& m : run.members) probes.push_back(probe_window(m.path, window.wave));

  RunWindow w;
  bool any_events = false;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (!probes[i].any_events) continue;
    const int64_t first = static_cast<int64_t>(probes[i].first_time_ns) + clock.offset(run.members[i].header);
    w.zero_ns = any_events ? std::min(w.zero_ns, first) : first;
    any_events = true;
  }
  if (!any_events) throw InputError(run_name(run), "no member has any event: there is nothing to window");
  if (window.wave) {
    wave_span(run, probes, clock, *window.wave, w);
  } else {
    w.begin_ns = window.from_ns.value_or(0);
    w.end_ns = window.to_ns;
  }

  bool any_written = false;
  for (size_t i = 0; i < run.members.size(); ++i) {
    const RunMember& m = run.members[i];
    const WindowProbe& p = probes[i];
    const int64_t offset = clock.offset(m.header);
    RunWindowMember& out = w.members.emplace_back();
    if (window.wave && !p.has_wave) {
      out.note = fmt::format("it has no wave {} (it has {})", *window.wave, waves_text(p.waves_seen));
      continue;
    }
    ExportWindow own;
    own.absolute = true;
    own.summary = window.summary;
    own.from_ns = own_time(w.zero_ns + static_cast<int64_t>(w.begin_ns), offset);
    if (w.end_ns) own.to_ns = own_time(w.zero_ns + static_cast<int64_t>(*w.end_ns), offset);
    if (own.to_ns && own.from_ns > own.to_ns) own.from_ns = own.to_ns;  // both before the member's clock starts
    const std::string path = stem + fmt::format(".window{}.pstrace", i);
    written.push_back(path);
    out.result = write_window(m.path, own, path);
    if (out.result.empty) {
      const bool later = p.any_events && own.to_ns && p.first_time_ns > *own.to_ns;
      out.note = !p.any_events ? "it has no events"
                 : later       ? fmt::format("it begins {} after the run's earliest event, after the window ends",
                                             format_seconds(static_cast<uint64_t>(static_cast<int64_t>(p.first_time_ns) +
                                                                            offset - w.zero_ns)))
                               : "it ends before the window begins";
      continue;
    }
    out.window_path = path;
    any_written = true;
  }
  if (!any_written) {
    std::string notes;
    for (size_t i = 0; i < w.members.size(); ++i)
      notes += fmt::format("; {}: {}", member_label(run.members[i]), w.members[i].note);
    throw InputError(run_name(run),
                     fmt::format("no member has anything in the window {} to {} after the run's earliest event{}",
                                 format_seconds(w.begin_ns), w.end_ns ? format_seconds(*w.end_ns) : "its end", notes));
  }
  return w;
}

Run windowed_run(const Run& run, const RunWindow& w) {
  Run out = run;
  out.members.clear();
  out.hosts.clear();
  for (size_t i = 0; i < run.members.size() && i < w.members.size(); ++i) {
    if (w.members[i].window_path.empty()) continue;
    RunMember m = run.members[i];
    m.path = w.members[i].window_path;
    const std::string host = host_of(m.header);
    if (std::find(out.hosts.begin(), out.hosts.end(), host) == out.hosts.end()) out.hosts.push_back(host);
    out.members.push_back(std::move(m));
  }
  return out;
}

}  // namespace psc

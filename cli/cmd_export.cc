// `peakscope export` (its command line: cli/command_table.cc).
//
// Writes a trace in another tool's format (docs/viewers.md). Several traces,
// or a folder, are a run (traces/run.h): perfetto, chrome and nsys-sqlite
// write them as one file with a process per rank on one clock.
// --from/--to (times after the trace's first event: 1.5s, 200ms, 30us, 100ns)
// or --wave N export a window of the trace; of a run, times after the run's
// earliest event on its clock, and wave N of every rank together
// (exchange/run_window.h). --summary leaves allocations out and keeps
// counters of live bytes and ranges (exchange/export_window.h), of a trace or
// of every member of a run. Exit 0 on success; 2 for bad usage, a file that is
// not a trace, a window with nothing in it, or an output that cannot be
// written (one line naming the file).
#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "common/progress.h"
#include "exchange/export_window.h"
#include "exchange/exporter.h"
#include "exchange/run_window.h"
#include "traces/reader.h"

namespace psc::cli {
namespace {

struct ExportArgs {
  ExportOptions options;
  std::vector<std::string> traces;  // folders expanded
  bool run = false;                 // several traces, or a folder
  std::string run_id;               // --run
  ExportWindow window;
};

std::string format_list() {
  std::string s = "formats:";
  for (const Exporter* e : exporters()) s += fmt::format("\n  {:<15} {}", e->name(), e->description());
  return s;
}

uint64_t duration_option(const char* name, const std::string& text) {
  try {
    return parse_duration_ns(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(name) + ": " + e.what());
  }
}

// False for -h: the usage and the formats are printed.
[[nodiscard]] bool parse(int argc, char** argv, ExportArgs& a, const Exporter** exporter) {
  ExportOptions& o = a.options;
  ExportWindow* window = &a.window;
  std::vector<std::string> inputs;
  std::string format, from, to, wave;
  bool summary = false;
  ArgParser args(command_spec("export"), format_list());
  args.option({"--format", "-f"}, &format);
  args.option({"-o", "--output"}, &o.output);
  args.option({"--calibration"}, &o.calibration);
  args.option({"--nvtxt-time-base"}, &o.nvtxt_time_base);
  args.option({"--nvtxt-align"}, &o.nvtxt_align);
  args.option({"--run"}, &a.run_id);
  args.option({"--from"}, &from);
  args.option({"--to"}, &to);
  args.option({"--wave"}, &wave);
  args.flag({"--summary"}, &summary);
  args.positionals(&inputs);
  if (!args.parse(argc, argv)) return false;
  if (!from.empty()) window->from_ns = duration_option("--from", from);
  if (!to.empty()) window->to_ns = duration_option("--to", to);
  if (!wave.empty()) {
    const int64_t n = parse_count("--wave", wave, "(a wave's number: 0, 1, ...)");
    if (n > INT32_MAX) throw UsageError("--wave: '" + wave + "' is larger than any wave's number");
    window->wave = static_cast<int32_t>(n);
  }
  window->summary = summary;
  if (window->wave && (window->from_ns || window->to_ns))
    throw UsageError("--wave cannot be combined with --from/--to");
  if (window->from_ns && window->to_ns && *window->to_ns < *window->from_ns)
    throw UsageError("--to " + to + " is before --from " + from);
  if (inputs.empty()) args.fail("no trace given");
  a.traces = expand_trace_folders(inputs, &a.run);
  a.run = a.run || a.traces.size() > 1 || !a.run_id.empty();
  o.trace = a.traces.front();
  if (format.empty()) throw UsageError("no --format given\n" + args.usage() + "\n" + format_list());
  *exporter = find_exporter(format);
  if (!*exporter) throw UsageError("unknown format '" + format + "'\n" + format_list());
  if (o.output.empty()) args.fail("no output given (-o OUT)");
  for (const std::string& trace : a.traces)
    if (o.output == trace) throw UsageError("the output would overwrite the trace '" + trace + "'");
  if (a.run && !(*exporter)->writes_runs())
    throw UsageError(
        fmt::format("--format {} holds one trace, not a run of {}; export one trace, or use --format "
                    "perfetto, chrome or nsys-sqlite for the whole run",
                    format, a.traces.size()));
  if (!o.calibration.empty() && format != "html")
    throw UsageError("--calibration applies to --format html only, not '" + format + "'");
  if (!o.nvtxt_time_base.empty() && format != "nvtxt")
    throw UsageError("--nvtxt-time-base applies to --format nvtxt only, not '" + format + "'");
  if (!o.nvtxt_time_base.empty() && o.nvtxt_time_base != "ClockMonotonicRaw" && o.nvtxt_time_base != "Manual")
    throw UsageError("--nvtxt-time-base is ClockMonotonicRaw or Manual, not '" + o.nvtxt_time_base + "'");
  if (!o.nvtxt_align.empty() && format != "nvtxt")
    throw UsageError("--nvtxt-align applies to --format nvtxt only, not '" + format + "'");
  if (!o.nvtxt_align.empty() && !o.nvtxt_time_base.empty() && o.nvtxt_time_base != "Manual")
    throw UsageError("--nvtxt-align writes TimeBase = Manual; it cannot be combined with --nvtxt-time-base " +
                     o.nvtxt_time_base);
  return true;
}

// Window traces written next to the output, removed when the export is done.
struct WindowFiles {
  std::vector<std::string> paths;
  ~WindowFiles() {
    for (const std::string& p : paths) std::remove(p.c_str());
  }
};

// The run, each member read through its summary (--summary) or its window
// (--from/--to, --wave: exchange/run_window.h).
void export_run(const Exporter& exporter, const ExportArgs& a) {
  const Run run = choose_run(a.traces, a.run_id);
  const ExportWindow& window = a.window;
  WindowFiles windows;
  if (window.from_ns || window.to_ns || window.wave) {
    const RunWindow w = write_run_window(run, window, a.options.output, windows.paths);
    const Run part = windowed_run(run, w);
    exporter.write_run(part, a.options);
    progress_done();
    fmt::print(
        "peakscope export: window {} to {} after the run's earliest event{}: {} of {} traces of run {} as one "
        "process each{}:\n",
        format_seconds(w.begin_ns), w.end_ns ? format_seconds(*w.end_ns) : "its end",
        window.wave ? fmt::format(" (wave {} of every rank)", *window.wave) : "", part.members.size(),
        run.members.size(), run.id.empty() ? "(no run id)" : "'" + run.id + "'", window.summary ? ", summarized" : "");
    for (size_t i = 0; i < run.members.size(); ++i) {
      const RunWindowMember& m = w.members[i];
      if (m.note.empty())
        fmt::print("  {}  {}: {} events, {} carried in from before\n", member_label(run.members[i]),
                   run.members[i].path, m.result.output_events, m.result.carried_events);
      else
        fmt::print("  {}  {}: nothing in the window ({})\n", member_label(run.members[i]), run.members[i].path, m.note);
    }
    return;
  }
  Run summarized = run;
  if (window.active()) {
    for (size_t i = 0; i < summarized.members.size(); ++i) {
      const std::string path = a.options.output + fmt::format(".window{}.pstrace", i);
      windows.paths.push_back(path);
      write_window(run.members[i].path, window, path);
      summarized.members[i].path = path;
    }
  }
  exporter.write_run(summarized, a.options);
  progress_done();
  fmt::print("peakscope export: {} traces of run {} as one process each{}:\n", run.members.size(),
             run.id.empty() ? "(no run id)" : "'" + run.id + "'", window.active() ? ", summarized" : "");
  for (const RunMember& m : run.members) fmt::print("  {}  {}\n", member_label(m), m.path);
}

}  // namespace

int cmd_export(int argc, char** argv) {
  const Exporter* exporter = nullptr;
  ExportArgs a;
  if (!parse(argc, argv, a, &exporter)) return kExitOk;
  const ExportOptions& options = a.options;
  if (a.run) {
    export_run(*exporter, a);
  } else if (a.window.active()) {
    // The window is a trace of its own, next to the output, that the exporter
    // reads as it reads any trace; it goes when the export is written.
    ExportOptions windowed = options;
    windowed.trace = options.output + ".window.pstrace";
    WindowFiles windows{{windowed.trace}};
    const WindowResult w = write_window(options.trace, a.window, windowed.trace);
    exporter->write(windowed);
    progress_done();
    fmt::print(
        "peakscope export: window {} to {} after the trace's first event: {} events, {} carried in from before\n",
        format_seconds(w.begin_ns - w.first_time_ns), format_seconds(w.end_ns - w.first_time_ns), w.output_events,
        w.carried_events);
  } else {
    exporter->write(options);
  }
  progress_done();
  // A file's size; of a device or a pipe (/dev/null, /dev/stdout) there is
  // none to give.
  struct stat st {};
  if (::stat(options.output.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    fmt::print("peakscope export: wrote {} ({}, {} bytes)\n", printable_path(options.output), exporter->name(),
               static_cast<long long>(st.st_size));
  else
    fmt::print("peakscope export: wrote {} ({})\n", printable_path(options.output), exporter->name());
  return kExitOk;
}

}  // namespace psc::cli

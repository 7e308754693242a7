#include "cli/command_table.h"

#include <algorithm>
#include <stdexcept>

#include "cli/commands.h"

namespace psc::cli {
namespace {

constexpr size_t kWidth = 100;  // usage lines wrap here
constexpr const char kProgramAbout[] =
    "what is live at a training step's memory peak, and what the next wave will need";

// Each command's entry: its forms, what it does, its options, and the
// function that runs it.
CommandSpec record_command() {
  return {
      "record",
      {"record [-o PATH] [--force] [--level allocated|reserved] [--host] [--host-min-bytes N] [--fork follow|stop] "
       "-- CMD ARGS..."},
      "runs CMD with the recorder preloaded, passes its exit status through, lists the traces written",
      {
          {{"-o", "--output"}, "PATH", "the trace of CMD's process (default peakscope.pstrace); others' go beside it"},
          {{"--force"}, "", "replace an earlier run's traces at PATH and beside it"},
          {{"--level"},
           "allocated|reserved",
           "events are tensor-level (default) or segment-level (a caching allocator)"},
          {{"--host"}, "", "record host memory (aligned allocations) instead of device memory"},
          {{"--host-min-bytes"}, "N", "with --host: leave out blocks under N bytes (then --allow-host-floor)"},
          {{"--fork"}, "follow|stop", "a forked child records to its own trace (follow, default) or stops"},
      },
      "",
      cmd_record};
}

CommandSpec report_command() {
  return {"report",
          {"report TRACE... | DIR [--run ID] [--json] [--waves] [--top N] [--timeline N]"},
          "peak, where, what is live, per layer, per wave; several traces or a folder: a run, by rank",
          {
              {{"--run"}, "ID", "the run to report when the traces are of several"},
              {{"--json"}, "", "print JSON (docs/report.md)"},
              {{"--waves"}, "", "also what each wave held per layer at its peak (JSON always has it)"},
              {{"--top"}, "N", "rows of each table of what is live at the peak (default 20)"},
              {{"--timeline"}, "N", "points of the live-bytes timeline (default 100, at most 10^6)"},
          },
          "",
          cmd_report};
}

CommandSpec top_command() {
  return {
      "top",
      {"top TRACE | DIR [--calibration CAL.json [--budget BYTES]] [--interval S] [--waves N] [--lines]",
       "top [-o PATH] [--force] [--host] [--calibration CAL.json [--budget BYTES]] [--lines] -- CMD ARGS..."},
      "a live view of a trace being written: live bytes now, the peak so far, where, the last waves and "
      "their prices",
      {
          {{"-o", "--output"},
           "PATH",
           "with -- CMD: the trace to record (default peakscope.pstrace); CMD's output "
           "goes to PATH.log"},
          {{"--force"}, "", "with -- CMD: replace an earlier run's traces at PATH"},
          {{"--host"}, "", "with -- CMD: record host memory (a run on the CPU)"},
          {{"--calibration"}, "CAL.json", "price each wave as it ends, beside its measured peak"},
          {{"--budget"}, "BYTES", "with --calibration: the largest wave that fits"},
          {{"--interval"}, "S", "seconds between refreshes (default 0.5)"},
          {{"--waves"}, "N", "the last N waves on the screen (default 8)"},
          {{"--lines"}, "", "a line per wave and per change instead of a screen (also on a dumb terminal or a pipe)"},
      },
      "Follows until the recorder closes the trace or its process ends; q or Ctrl-C stops following (a command "
      "top started goes on). A folder, or a command that starts ranks (torchrun), is followed trace by trace as "
      "each appears, the busiest first. The final figures are `report`'s.",
      cmd_top};
}

CommandSpec export_command() {
  return {"export",
          {"export TRACE... | DIR --format FMT -o OUT [--run ID] [--calibration CAL.json] [--nvtxt-time-base BASE] "
           "[--nvtxt-align REPORT.sqlite] [--from T0] [--to T1] [--wave N] [--summary]"},
          "writes a trace, or a run as one file, in another tool's format (docs/viewers.md)",
          {
              {{"-f", "--format"}, "FMT", "the format to write (listed below)"},
              {{"-o", "--output"}, "OUT", "the file to write"},
              {{"--run"}, "ID", "the run to export when the traces are of several"},
              {{"--calibration"}, "CAL.json", "html only: add the accuracy check against this calibration"},
              {{"--nvtxt-time-base"}, "BASE", "nvtxt only: ClockMonotonicRaw (default) or Manual"},
              {{"--nvtxt-align"}, "REPORT.sqlite", "nvtxt only: times on this Nsight Systems report's clock"},
              {{"--from"}, "T0", "a window from T0 (see windows below)"},
              {{"--to"}, "T1", "a window up to T1"},
              {{"--wave"}, "N", "wave N's span only (not with --from/--to)"},
              {{"--summary"}, "", "counters of live bytes and ranges, no allocations"},
          },
          "windows: --from/--to T (1.5s, 200ms, 30us, 100ns) count from the trace's first event; of a run,\n"
          "  from the run's earliest event on its clock. --wave N: wave N's span; of a run, from the first\n"
          "  rank's push to the last rank's pop of wave N. --summary: counters and ranges, no allocations.",
          cmd_export};
}

CommandSpec import_command() {
  return {"import",
          {"import FILE --from FMT -o TRACE [--pid PID] [--force]"},
          "converts another tool's file into a .pstrace that report, calibrate and check read",
          {
              {{"-f", "--from"}, "FMT", "the format of FILE (listed below)"},
              {{"-o", "--output"}, "TRACE", "the trace to write"},
              {{"--pid"}, "PID", "the process to import when FILE holds several"},
              {{"--force"}, "", "replace TRACE when it exists (a file only)"},
          },
          "",
          cmd_import};
}

CommandSpec price_command() {
  return {
      "price",
      {"price PLAN.json [--json] [--budget BYTES] [--report FILE]",
       "price --calibration CAL.json --tokens N [--sequences L,L,... | --max-sequence-length L] [--slots A,B] "
       "[--cold [--after-first-wave]] [--gradients-exist] [--rank-shares W,W,...] [--json]",
       "price --calibration CAL.json --groups SLOT=N|SLOT=L+L+...,... [--backward-order I,J,...] "
       "[--cold [--after-first-wave]] [--gradients-exist] [--json]",
       "price --calibration CAL.json --budget BYTES [--max-sequence-length L] [--max-tokens N] [--slots A,B] "
       "[--cold [--after-first-wave]] [--gradients-exist] [--rank-shares W,W,...] [--json]",
       "price --calibration CAL.json --budget BYTES --groups SLOT=W,SLOT=W,... [--backward-order I,J,...] "
       "[--max-sequence-length L] [--max-tokens N] [--cold [--after-first-wave]] [--gradients-exist] [--json]"},
      "the price of a wave from a plan, or of a wave nobody recorded from a calibration (docs/pricing.md)",
      {
          {{"--json"}, "", "print JSON"},
          {{"--budget"}, "BYTES", "the largest wave whose price fits BYTES (a calibration's may end in KiB..TiB)"},
          {{"--report"}, "FILE", "a plan: also write a report that `replay` re-prices"},
          {{"--calibration"}, "CAL.json", "price from this calibration (`calibrate` writes it)"},
          {{"--tokens"}, "N", "the wave's tokens"},
          {{"--sequences"}, "L,L,...", "the wave's packed sequence lengths (one wave, no --budget)"},
          {{"--slots"},
           "A,B",
           "the adapters (slots) the wave trains, one gradient group each, equal parts (the first a token more "
           "where N does not divide)"},
          {{"--groups"},
           "SLOT=N,...",
           "each gradient group's slot and size, in forward order: N tokens or L+L+... "
           "packed sequences (with --budget: relative shares W of the wave)"},
          {{"--backward-order"},
           "I,J,...",
           "the order the groups' backwards run, as their indices in --groups (default: priced in the worst order)"},
          {{"--cold"},
           "",
           "the wave's shape has not run before (its first execution is priced; by default as if it were the "
           "process's first wave)"},
          {{"--after-first-wave"},
           "",
           "with --cold: the process has run a wave before, so only what a new shape adds is charged, not the "
           "workspaces a process's first wave keeps"},
          {{"--gradients-exist"}, "", "the adapters' gradients exist already: none pending"},
          {{"--max-sequence-length"},
           "L",
           "the wave packed from sequences of at most L tokens (with --budget: each width searched)"},
          {{"--max-tokens"}, "N", "with --budget: search widths up to N tokens (default 2^20)"},
          {{"--rank-shares"}, "W,W,...", "the wave split between data-parallel ranks by these relative shares"},
      },
      "either calibration form with --rank-shares W,W,...: the wave split between data-parallel ranks by those\n"
      "relative shares, each rank's part priced, the busiest rank's price the wave's (with --budget: the\n"
      "largest wave whose busiest part fits; --max-sequence-length packs each part)\n"
      "BYTES may end in KiB, MiB, GiB or TiB with --calibration; a plan's budget is plain bytes",
      cmd_price};
}

CommandSpec calibrate_command() {
  return {"calibrate",
          {"calibrate TRACE... | DIR -o CAL.json [--safety F] [--allow-host-floor]",
           "calibrate --follow TRACE -o CAL.json [--interval S] [--safety F] [--allow-host-floor]"},
          "fits the pricing model's liveness terms per model from traced waves and writes them as JSON",
          {
              {{"-o"}, "CAL.json", "the calibration to write (replaced whole: written beside it, then renamed)"},
              {{"--safety"}, "F", "a flat margin F (1 to 64) in place of the one derived from left-out sizes"},
              {{"--allow-host-floor"}, "", "accept traces recorded with --host-min-bytes"},
              {{"--follow"}, "", "a trace being written: recalibrate as its waves end, until the recorder closes it"},
              {{"--interval"}, "S", "with --follow: seconds between looks at the trace (default 1)"},
          },
          "With --follow, CAL.json is rewritten whenever the waves so far change the calibration, with a line saying "
          "what the waves still lack; the last one is calibrate's of the whole trace.",
          cmd_calibrate};
}

CommandSpec check_command() {
  return {"check",
          {"check --calibration CAL.json TRACE... | DIR [--json] [--terms] [--floor-only] [--allow-host-floor]"},
          "accuracy table: each wave's price against its measured peak; exit 1 on an under-estimate",
          {
              {{"--calibration"}, "CAL.json", "the calibration to check"},
              {{"--json"}, "", "print JSON"},
              {{"--terms"}, "", "also each term's over-estimate per wave (JSON always has it)"},
              {{"--floor-only"}, "", "judge the floor-only price"},
              {{"--allow-host-floor"}, "", "accept traces recorded with --host-min-bytes"},
          },
          "",
          cmd_check};
}

CommandSpec replay_command() {
  return {"replay",
          {"replay REPORT.json... [--allow-source-drift] [--json]"},
          "re-prices saved reports (price --report); exit 1 on any mismatch, 2 when a report cannot be read (the "
          "others are still re-priced)",
          {
              {{"--allow-source-drift"}, "", "re-price a report that other pricing sources wrote"},
              {{"--json"}, "", "print JSON"},
          },
          "",
          cmd_replay};
}

CommandSpec version_command() {
  return {"version",
          {"version"},
          "the version, the trace and calibration formats it writes and reads, what its recorder library has",
          {},
          "",
          cmd_version};
}

// The commands in the order `peakscope help` lists them.
std::vector<CommandSpec> make_table() {
  return {record_command(), report_command(),    top_command(),   export_command(), import_command(),
          price_command(),  calibrate_command(), check_command(), replay_command(), version_command()};
}

// The words of a form, a bracketed group or "A | B" kept whole: where a usage
// line may break.
std::vector<std::string> break_points(const std::string& form) {
  std::vector<std::string> words;
  std::string word;
  int depth = 0;
  for (char c : form) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ' ' && depth == 0) {
      if (!word.empty()) words.push_back(word);
      word.clear();
      continue;
    }
    word += c;
  }
  if (!word.empty()) words.push_back(word);
  std::vector<std::string> joined;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "|" && !joined.empty() && i + 1 < words.size()) {
      joined.back() += " | " + words[++i];
    } else {
      joined.push_back(words[i]);
    }
  }
  return joined;
}

// `prefix` + the form, wrapped at kWidth; continuation lines start under the
// first argument. No final newline.
std::string wrap_form(const std::string& prefix, const std::string& form) {
  const std::vector<std::string> words = break_points(form);
  if (words.empty()) return prefix;
  std::string out = prefix + words[0];
  const std::string indent(prefix.size() + words[0].size() + 1, ' ');
  size_t line_length = out.size();
  for (size_t i = 1; i < words.size(); ++i) {
    if (i > 1 && line_length + 1 + words[i].size() > kWidth) {
      out += "\n" + indent + words[i];
      line_length = indent.size() + words[i].size();
    } else {
      out += " " + words[i];
      line_length += 1 + words[i].size();
    }
  }
  return out;
}

std::string option_left(const OptionSpec& o) {
  std::string left;
  for (const std::string& n : o.names) left += (left.empty() ? "" : ", ") + n;
  if (!o.value.empty()) left += " " + o.value;
  return left;
}

// Text for a roff line: backslashes escaped, hyphens as \-, and a line that
// would start with a control character ('.' or ''') made plain.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = make_table();
  return table;
}

const CommandSpec& command_spec(std::string_view name) {
  for (const CommandSpec& c : command_table())
    if (c.name == name) return c;
  throw std::logic_error("no command '" + std::string(name) + "' in cli/command_table.cc");
}

std::string usage_text(const CommandSpec& command) {
  std::string out;
  for (size_t i = 0; i < command.forms.size(); ++i)
    out += (i ? "\n" : "") + wrap_form(i ? "       peakscope " : "usage: peakscope ", command.forms[i]);
  return out;
}

std::string help_text(const CommandSpec& command) {
  std::string out = usage_text(command) + "\n" + command.about + "\n";
  if (!command.options.empty()) {
    size_t width = 0;
    for (const OptionSpec& o : command.options) width = std::max(width, option_left(o).size());
    out += "\noptions:\n";
    for (const OptionSpec& o : command.options) {
      const std::string left = option_left(o);
      out += "  " + left + std::string(width - left.size() + 2, ' ') + o.help + "\n";
    }
  }
  if (!command.notes.empty()) out += "\n" + command.notes + "\n";
  return out;
}

std::string program_help() {
  std::string out = "usage: peakscope <command> [args]\n\ncommands:\n";
  for (const CommandSpec& c : command_table()) {
    for (const std::string& form : c.forms) out += wrap_form("  peakscope ", form) + "\n";
    out += "      " + c.about + "\n";
  }
  out += "\n'peakscope <command> -h' shows a command's options\n";
  out += "exit codes: 0 success, 1 a check failed, 2 bad usage or bad input\n";
  return out;
}

std::string man_page(const std::string& version) {
  std::string out = ".TH PEAKSCOPE 1 \"\" \"peakscope " + roff(version) + "\" \"User Commands\"\n";
  out += ".SH NAME\npeakscope \\- " + roff(kProgramAbout) + "\n";
  out += ".SH SYNOPSIS\n.B peakscope\n.I command\n.RI [ args ]\n";
  out += ".SH DESCRIPTION\nOne program with subcommands. \\fBpeakscope\\fR \\fIcommand\\fR \\fB\\-h\\fR prints a ";
  out += "command's options, \\fBpeakscope help\\fR all commands.\n";
  out += ".SH COMMANDS\n";
  for (const CommandSpec& c : command_table()) {
    out += ".SS " + roff(c.name) + "\n.nf\n";
    for (const std::string& form : c.forms) out += roff(wrap_form("peakscope ", form)) + "\n";
    out += ".fi\n.PP\n" + roff(c.about) + "\n";
    for (const OptionSpec& o : c.options) {
      std::string names;
      for (const std::string& n : o.names) names += (names.empty() ? "" : ", ") + roff(n);
      out += ".TP\n\\fB" + names + "\\fR" + (o.value.empty() ? "" : " \\fI" + roff(o.value) + "\\fR") + "\n";
      out += roff(o.help) + "\n";
    }
    if (!c.notes.empty()) out += ".PP\n.nf\n" + roff(c.notes) + "\n.fi\n";
  }
  out += ".SH EXIT STATUS\n0 success, 1 a check failed (a mismatch, an under\\-estimate), 2 bad usage or bad input.\n";
  return out;
}

}  // namespace psc::cli

// Exporters and importers behind one interface (docs/design.md, "Data flow"): the CLI
// (`peakscope export`, `peakscope import`) looks a format up by name and never
// knows more than this header. Every exporter reads the trace through the one
// reader (traces/reader.h); every importer is a parser that hands its events
// to one ImportSink (exchange/import_sink.h), which writes the trace.
//
// Errors: an input that is not what the format says (a damaged pickle, a
// database without the tables, a trace that is not a trace) throws InputError
// or TraceError, naming the file and, where it applies, the byte offset; the CLI
// turns either into exit code 2. Nothing here may crash or hang on bad input.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "traces/run.h"

namespace psc {

// Bad input to an exporter or importer: the file is not what its format says.
class InputError : public std::runtime_error {
 public:
  static constexpr uint64_t kNoOffset = UINT64_MAX;
  InputError(const std::string& path, const std::string& reason, uint64_t offset = kNoOffset);
  const std::string& path() const { return path_; }
  uint64_t offset() const { return offset_; }

 private:
  std::string path_;
  uint64_t offset_;
};

using WarningSink = std::function<void(const std::string&)>;

struct ExportOptions {
  std::string trace;   // the .pstrace to read
  std::string output;  // the file to write (created or truncated)
  // html: a calibration to draw the accuracy table from ("" for none).
  std::string calibration;
  // nvtxt: "ClockMonotonicRaw" (default) or "Manual"; see docs/viewers.md.
  std::string nvtxt_time_base;
  // nvtxt: an `nsys export --type sqlite` of the report the file will be
  // merged into; times are then placed on that report's own timeline by the
  // NVTX events both tools saw (TimeBase = Manual). "" for none.
  std::string nvtxt_align;
  // chrome: warn once the output passes this size (viewers load all of it).
  uint64_t chrome_warn_bytes = 100ull << 20;
  // Where warnings go (size limits, things a format cannot carry); stderr when empty.
  WarningSink warn;
};

struct ImportOptions {
  std::string input;   // the foreign file
  std::string output;  // the .pstrace to write
  // nsys-sqlite: the process to import when the export holds several; 0 = the only one.
  uint32_t pid = 0;
  WarningSink warn;
};

// What an importer did, for the CLI to print.
struct ImportSummary {
  uint64_t events = 0;
  std::vector<std::string> lines;  // "allocations: 12", "unmatched frees: 0", ...
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // Throws TraceError / InputError for unreadable input, std::runtime_error
  // when the output cannot be written.
  virtual void write(const ExportOptions& options) const = 0;
  // Whether write_run does more than refuse.
  virtual bool writes_runs() const { return false; }
  // Every trace of a run (traces/run.h) in one file, a process per member,
  // times on the run's clock; options.trace is unused. Formats that hold one
  // process throw std::invalid_argument saying so.
  virtual void write_run(const Run& run, const ExportOptions& options) const;
};

class Importer {
 public:
  virtual ~Importer() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual ImportSummary read(const ImportOptions& options) const = 0;
};

const std::vector<const Exporter*>& exporters();
const std::vector<const Importer*>& importers();
const Exporter* find_exporter(std::string_view name);  // nullptr when unknown
const Importer* find_importer(std::string_view name);

// Sends a warning to the sink, or to stderr when there is none.
void emit_warning(const WarningSink& sink, const std::string& text);

}  // namespace psc

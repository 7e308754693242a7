// The nsys-sqlite importer's view of the process it imports: which one
// (--pid), its clock base, command line, rank and threads, as the export's
// tables (and, for a file peakscope wrote, PEAKSCOPE_INFO) give them. The rows
// themselves are read by import_nsys_sqlite.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "exchange/exporter.h"
#include "exchange/import_sink.h"
#include "exchange/nsys/sqlite_db.h"
#include "traces/writer.h"

namespace psc::nsys {

// The thread of memory rows whose CUDA call the file does not hold.
constexpr int64_t kUnknownThread = -1;

struct ImportedProcess {
  uint32_t pid = 0;
  bool ranges_only = false;  // no memory rows: the process was chosen by its NVTX events
  int32_t rank = -1;
  int32_t local_rank = -1;
  uint64_t utc_epoch_ns = 0;
  uint64_t base_ns = 0;   // added to the file's times: CLOCK_MONOTONIC at the session start
  bool reserved = false;  // the memory rows are of the reserved level
  std::string command;
  std::map<std::string, std::string> info;  // PEAKSCOPE_INFO, this process's keys unprefixed
  std::unordered_map<int64_t, std::string> string_ids;
  std::unordered_map<int64_t, std::string> thread_names;  // by globalTid
};

// Chooses the process (options.pid among several) and reads what the file
// says of it. Throws InputError when there is nothing to import or the
// choice is ambiguous.
ImportedProcess read_process(sqlite::Db& db, const ImportOptions& options, bool has_memory, bool has_host);

// Declares the threads of the events in `sink` (their globalTids): the indices
// a peakscope export recorded, else in the order of the ids, the unknown
// thread last. Returns how many there are.
size_t declare_threads(const ImportedProcess& process, const ImportOptions& options, ImportSink& sink);

// The trace's header for the process.
TraceWriterOptions trace_header(const ImportedProcess& process, bool host_rows);

}  // namespace psc::nsys

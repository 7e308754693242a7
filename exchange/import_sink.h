// What every importer writes through: a parser reads the foreign file and
// hands events to one ImportSink, which owns what a trace needs beyond the
// events themselves: their order, the thread and string tables, the range
// each event is attributed to, sequence numbers, progress, and the atomic
// commit (OutputFile: written under a temporary name, renamed into place only
// once the trace is whole).
//
// Not streaming: the events of one import are held, ordered, then written.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exchange/exporter.h"
#include "format/event.h"
#include "traces/writer.h"

namespace psc {

// One event of the foreign file, before its thread index, range and sequence
// number are known.
struct ImportEvent {
  static constexpr uint32_t kNoString = UINT32_MAX;

  // Where the event sorts (ImportSink::sort): `primary` first (a time, or an
  // exact order the file records), then the parser's tie-breaks.
  struct SortKey {
    uint64_t primary = 0;
    int rank = 0;
    int64_t nest = 0;
    uint64_t row = 0;
  };

  // The trace's event as far as the file tells it: time, kind, flags, address,
  // bytes, stream, device, memory kind, API. The sink fills in the rest
  // (sequence number, thread index, range, name and payload ids).
  Event event = blank();
  SortKey key;
  int64_t thread = 0;            // the file's own thread id; ImportSink::thread gives it an index
  uint32_t name = kNoString;     // ImportSink::intern
  uint32_t payload = kNoString;  // ImportSink::intern
  uint64_t row = 0;              // the parser's own: where in the file the event came from
  uint8_t source = 0;            // the parser's own: which table or list of the file

  // Host (device -1), made by a call the trace does not name.
  static Event blank() {
    Event e{};
    e.device = -1;
    e.api = Api::kImported;
    return e;
  }
};

class ImportSink {
 public:
  // When the string table reaches the trace: all of it before the first
  // event, in the order interned, or each string just before the first event
  // that names it.
  enum class Strings { kUpFront, kAsUsed };

  explicit ImportSink(const ImportOptions& options) : options_(options) {}

  uint32_t intern(std::string_view text);
  void add(const ImportEvent& e) { events_.push_back(e); }
  std::vector<ImportEvent>& events() { return events_; }
  const std::vector<ImportEvent>& events() const { return events_; }

  // Declares a thread of the trace: events whose `thread` is `id` get `index`.
  void thread(int64_t id, uint32_t index, uint64_t os_tid, std::string name);

  // Orders the events by their key, stably (equal keys keep the order added).
  void sort();

  // Writes the trace: the header, the threads in the order declared, the
  // strings, then the events in order, each numbered and attributed to the
  // innermost push/pop range open on its thread. Renames it into place when
  // whole; on a throw nothing is left at the output. Returns the events written.
  uint64_t commit(const TraceWriterOptions& header, Strings strings);

 private:
  struct Thread {
    int64_t id;
    uint32_t index;
    uint64_t os_tid;
    std::string name;
  };

  const ImportOptions& options_;
  std::vector<ImportEvent> events_;
  std::vector<Thread> threads_;
  std::unordered_map<int64_t, uint32_t> thread_index_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_index_;
};

}  // namespace psc

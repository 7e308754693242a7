#include "exchange/import_sink.h"

#include <algorithm>
#include <tuple>

#include "common/progress.h"
#include "exchange/export_output.h"

namespace psc {

uint32_t ImportSink::intern(std::string_view text) {
  auto it = string_index_.find(std::string(text));
  if (it != string_index_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(text);
  string_index_.emplace(strings_.back(), id);
  return id;
}

void ImportSink::thread(int64_t id, uint32_t index, uint64_t os_tid, std::string name) {
  thread_index_[id] = index;
  threads_.push_back({id, index, os_tid, std::move(name)});
}

void ImportSink::sort() {
  auto key = [](const ImportEvent& e) { return std::tie(e.key.primary, e.key.rank, e.key.nest, e.key.row); };
  std::stable_sort(events_.begin(), events_.end(),
                   [&](const ImportEvent& a, const ImportEvent& b) { return key(a) < key(b); });
}

uint64_t ImportSink::commit(const TraceWriterOptions& header, Strings strings) {
  // The trace goes to OutputFile's temporary path; OutputFile renames it into
  // place once the writer has closed it whole (or writes a device in place).
  OutputFile out(options_.output, 0);
  uint64_t events = 0;
  {
    TraceWriter writer(out.temp_path(), header);
    uint32_t thread_count = 0;
    for (const Thread& t : threads_) {
      writer.thread(t.index, t.os_tid, t.name);
      thread_count = std::max(thread_count, t.index + 1);
    }
    std::vector<StringId> ids(strings_.size());
    std::vector<bool> written(strings_.size(), strings == Strings::kUpFront);
    if (strings == Strings::kUpFront)
      for (size_t i = 0; i < strings_.size(); ++i) ids[i] = writer.intern(strings_[i]);
    auto id = [&](uint32_t s) {
      if (s == ImportEvent::kNoString) return StringId{};
      if (!written[s]) {
        ids[s] = writer.intern(strings_[s]);
        written[s] = true;
      }
      return ids[s];
    };

    // Each thread's open push/pop ranges: an event belongs to the innermost.
    std::vector<std::vector<StringId>> stacks(thread_count);
    uint64_t seq = 0;
    progress_stage("writing " + options_.output, events_.size());
    ProgressBatch progress;
    for (const ImportEvent& it : events_) {
      progress.add();
      Event e = it.event;
      e.seq = ++seq;
      e.thread = thread_index_.at(it.thread);
      e.name = id(it.name);
      e.payload = id(it.payload);
      std::vector<StringId>& open = stacks[e.thread];
      if (!open.empty()) e.range = open.back();
      if (e.kind == EventKind::kRangePush) open.push_back(e.name);
      if (e.kind == EventKind::kRangePop && !open.empty()) open.pop_back();
      writer.event(e);
    }
    progress.flush();
    writer.close();
    events = writer.events_written();
  }
  out.commit();
  return events;
}

}  // namespace psc

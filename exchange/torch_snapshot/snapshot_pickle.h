// The pickle side of the torch-snapshot exporter: lists spooled to a
// temporary file as they grow, JSON values written as Python would pickle
// them, and the segments at the end of a snapshot with the blocks that tile
// them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "exchange/export_output.h"
#include "exchange/torch_snapshot/pickle_writer.h"

namespace psc {

// A list's pickle, written to an unlinked temporary file as it grows.
class ListFile {
 public:
  // Throws std::runtime_error when no temporary file can be made.
  explicit ListFile(uint64_t* memo);
  ~ListFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ListFile(const ListFile&) = delete;
  ListFile& operator=(const ListFile&) = delete;

  // The writer for the next item; call done() after writing it.
  pickle::Writer& item() {
    if (in_batch_ == 0) writer_.mark();
    return writer_;
  }
  void done();
  // Appends the whole list to `out`.
  void copy_to(OutputFile& out);

 private:
  void close_batch();
  void flush();

  int fd_ = -1;
  pickle::Writer writer_;
  size_t in_batch_ = 0;
};

// A JSON value as the pickle Python would write for it.
void json_value(pickle::Writer& w, const nlohmann::ordered_json& v, int depth = 0);
// A memory entry's other fields (a kFieldsMark's), but those written already.
void write_extra(pickle::Writer& w, const nlohmann::ordered_json& j);
// The segments a snapshot import kept (kSegmentMark payloads), as they were;
// their frames emptied.
void write_recorded_segments(pickle::Writer& w, std::vector<nlohmann::ordered_json>& segment_marks);

struct EndSegment {
  int16_t device;
  uint64_t address, bytes, stream;
  bool expandable;
  bool made_up;  // holds the block at its address only
};

// The snapshot's segments, each tiled by its blocks: the allocated ones
// allocated(segment) gives (address, size, in address order) and the
// inactive gaps between them.
void write_segments(pickle::Writer& w, const std::vector<EndSegment>& segments,
                    const std::function<std::vector<std::pair<uint64_t, uint64_t>>(const EndSegment&)>& allocated);

}  // namespace psc

// Reading a trace while it is being written; read_trace (traces/reader.h)
// reads one that is done. Both read chunks through traces/chunk_decoder.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "traces/reader.h"

namespace psc {

// Follows a trace that is still being written (`peakscope top`, `calibrate
// --follow`): each poll() hands the visitor the whole chunks that landed since
// the last one, in file order, and never waits. A chunk the writer has not
// finished (the file ends inside it) is left for a later poll; the end mark
// closes the trace; a writer whose process is gone (the header's pid, on this
// host) with no end mark and no more bytes ends it too, "not closed". Damage
// with whole chunks after it is stepped over as read_trace does (a gap);
// another trace appended ends the follow there. Memory: one chunk, whatever
// the trace's length. The visitor's on_begin comes with the first poll that
// finds the file's headers, on_end when the follow is over.
struct FollowStatus {
  enum class State {
    kWaiting,     // no readable header yet (the file is missing or being created)
    kFollowing,   // the writer may add more
    kClosed,      // the recorder closed the trace (its end mark)
    kWriterGone,  // the writer's process ended without closing it
    kStopped,     // the visitor was finished, or another trace begins
  };
  State state = State::kWaiting;
  uint64_t bytes = 0;  // read so far: the end of the last whole chunk
  uint64_t chunks = 0;
  uint64_t events = 0;
  uint64_t gaps = 0;   // damaged stretches stepped over
  std::string reason;  // kWaiting: why no header yet; kStopped, gaps: what was found

  bool over() const { return state == State::kClosed || state == State::kWriterGone || state == State::kStopped; }
};
const char* follow_state_name(FollowStatus::State state);

// Whether a process runs: kEnded when it is gone or a zombie nobody reaped
// (it has written all it will); kUnknown for pid 0.
enum class WriterState { kRunning, kEnded, kUnknown };
WriterState process_state(uint32_t pid);
// The state of the process a trace's header names (its pid), asked only on
// the host the header names: kUnknown elsewhere.
WriterState writer_state(const format::FileHeader& header);

class TraceFollower {
 public:
  // writer_pid: the process writing the trace when the caller knows it (it
  // started it); 0: the header's pid when the header's host is this one.
  explicit TraceFollower(std::string path, uint32_t writer_pid = 0);
  ~TraceFollower();
  TraceFollower(const TraceFollower&) = delete;
  TraceFollower& operator=(const TraceFollower&) = delete;

  // Reads what has landed. Throws TraceError for a file that is not a trace
  // (bad magic, a newer format), as read_trace does.
  FollowStatus poll(TraceVisitor& visitor);
  // The writer is known to have ended (the caller waited for it): the next
  // poll that finds no more bytes ends the follow, closed or not.
  void writer_ended() { writer_ended_ = true; }
  const FollowStatus& status() const { return status_; }
  const TraceMeta& meta() const { return meta_; }

 private:
  // What reading the chunk at offset_ came to.
  enum class Step {
    kRead,  // a chunk read, or damage stepped over: read on
    kWait,  // nothing whole there yet
    kOver,  // the follow ended (finish)
  };
  bool open_headers(TraceVisitor& visitor);
  Step read_chunk(TraceVisitor& visitor, uint64_t size);
  bool writer_alive();
  void finish(TraceVisitor& visitor, FollowStatus::State state, const std::string& reason = {});

  struct Open;  // the open file and its decoder
  std::string path_;
  uint32_t writer_pid_;
  bool writer_ended_ = false;
  std::unique_ptr<Open> open_;
  TraceMeta meta_;
  FollowStatus status_;
  uint64_t offset_ = 0;
};

}  // namespace psc

// The trace sink's file, private to the sink (runtime/trace_sink.cc): its
// name and creation (runtime/trace_file_name.cc), its descriptor kept out of
// the program's way, and every write to it (runtime/sink_file.cc). A write
// never ends the program (RLIMIT_FSIZE) and never goes to a file the
// recorder did not create; a write that fails loses one chunk, counted.
// The sink's writer thread builds the chunks; this puts them in the file.
// All of it runs under the sink's lock (or in a fork child before any
// thread): nothing here is atomic.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "format/chunk_codec.h"
#include "format/file_format.h"
#include "runtime/buffers.h"

namespace psc::rt::sink {

// ---- the file (sink_file.cc) ----
extern int g_fd;
extern bool g_open_failed;
extern bool g_file_created;          // this process has its file (g_fd may have been lost since: ensure_own_fd)
extern uint32_t g_file_generation;   // fresh files started after the file was lost (start_fresh_file)
extern format::FileHeader g_header;  // as on disk (flags change after the fact)
extern uint64_t g_file_bytes;        // header and whole chunks written: where the next chunk goes
extern bool g_header_pending;        // the header is not on disk yet (its write failed)
extern bool g_write_failing;         // in an episode of failed writes (said once on stderr)
extern bool g_metadata_lost;         // a lost chunk held strings, thread names or counts
extern char g_command[4096];
extern size_t g_command_length;

// ---- the chunk being built (trace_sink.cc) ----
extern uint8_t* g_chunk;
extern format::ThreadCodecState g_codec_threads[kMaxThreads];
// The encoder on cache lines of its own: the writer updates it for every
// event, and a producer's hot variable that shared its last line (the host
// hooks' size threshold did) was taken from the producer's cache at every
// event: measured, the writer's stores to it were a quarter of its encoding.
struct alignas(64) WriterEncoder : format::ChunkEncoder {
  using format::ChunkEncoder::ChunkEncoder;
};
extern WriterEncoder g_encoder;
extern uint64_t g_chunk_events;    // events in the chunk being built
extern uint64_t g_events_written;  // events in the file and in the chunk being built

// ---- the name (trace_file_name.cc) ----
// Appends s at out (NUL-terminated); returns the end.
char* append(char* out, const char* s);
// Creates the file at path, or at a free <stem>.e<N>.pstrace when that name
// is taken (next_free_generation). Returns the descriptor (path holds the
// name), or -1 with errno set.
int create_at_or_next(char* path);
// The same at the trace's path: exactly the configured one in the primary
// process, else the stem + "[.r<RANK>].<host>.p<pid>.pstrace".
int create_trace_file(char* path, size_t size);

// ---- the descriptor and the writes (sink_file.cc) ----
// Closes the trace's descriptor if it still names our file: the number may be
// the program's by now.
void close_own_fd();
// Before each write: the descriptor still names our file, or the file is
// opened again by name, or recording goes on in a fresh file. 0 or the errno.
int ensure_own_fd();
// Sets or clears a header flag, and rewrites the header when it changed.
void set_header_flag(uint32_t flag, bool on);
// Creates the file and writes its headers, once; false when it cannot be
// created (recording stops).
bool open_file();
// Writes the chunk being built and begins the next. last: the closing
// chunk, which may use the room kept below a size limit. Returns 0, or the
// errno of a write that failed (-1: no file).
int write_chunk(bool last = false);
// Says on stderr what a trace whose closing chunk could not be written lacks.
void say_close_failed(int err);

}  // namespace psc::rt::sink

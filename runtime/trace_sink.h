// The recorder's trace sink, where recorded events leave the process: its
// writer thread drains every thread's buffer, merges events into global
// sequence order, encodes chunks and writes them to the trace file at least
// every flush interval, at exit, at exec and at fatal signals. The file is
// written crash-safe: whole chunks only, a failed write counted and cut back,
// never past a file size limit, never into a file the program owns
// (runtime/sink_file.h). traces/writer.h is the other writer of .pstrace
// files: offline, for importers and tests, outside the recorder.
#pragma once

#include <cstdint>

namespace psc::rt {

// Starts the writer thread (idempotent). Opens the file now for the primary
// process, else lazily at the first event.
bool writer_start();
// Asks the writer to wake soon (a buffer is filling up). Cheap when awake.
void writer_nudge();
// Writes everything recorded so far; waits at most timeout_ns. Async-signal-safe
// (used from the fatal-signal handler): futex and nanosleep only.
bool writer_flush(uint64_t timeout_ns);
// Final flush, END record, close the file, stop the thread.
void writer_stop();
// pthread_atfork handlers.
void writer_before_fork();
void writer_after_fork_parent();
// raw_clone: after a clone no fork handler saw (lifecycle.cc, own_recorder).
void writer_after_fork_child(bool raw_clone);
// Before exec (the new image never runs our exit path): writes everything
// recorded so far, then the drop counts and END record, and marks the header
// kHeaderEndedByExec. Returns true with the writer's lock held, so nothing
// else is written by this image; then, if exec returns, the caller must call
// writer_unseal_after_failed_exec(), which takes the closing chunk back.
bool writer_seal_for_exec();
void writer_unseal_after_failed_exec();
// Starts a fresh writer thread in a fork child that keeps recording.
bool writer_restart_in_child();
// True on the writer thread.
bool on_writer_thread();
// True while a writer thread runs (it frees the buffers of exited threads).
bool writer_running();

}  // namespace psc::rt

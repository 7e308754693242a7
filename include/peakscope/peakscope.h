/* peakscope public C API.
 *
 * Explicit annotations for frameworks that do not use NVTX. Every function is
 * safe to call when the recorder is not loaded through a weak reference or
 * ctypes lookup: callers that link nothing simply do not see these symbols.
 * Names follow the convention the analysis parses: "<phase>/layer.<i>" with
 * phase one of forward, recompute, backward, head, optimizer, and "wave" for a
 * micro-batch whose payload is given by psc_mark("wave", "{...}") right after
 * the push.
 */
#ifndef PEAKSCOPE_H
#define PEAKSCOPE_H

#ifdef __cplusplus
extern "C" {
#endif

#define PSC_API_VERSION 1

/* Opens a range on the calling thread (like nvtxRangePushA). */
void psc_range_push(const char* name);
/* Closes the innermost range opened on the calling thread. */
void psc_range_pop(void);
/* An instant event; json_payload may be NULL. */
void psc_mark(const char* name, const char* json_payload);
/* Flushes everything recorded so far to the trace file (blocks until written). */
void psc_flush(void);
/* The API version of the loaded recorder, PSC_API_VERSION. */
int psc_api_version(void);

/* A tensor of a caching allocator that the recorder cannot see through its
 * hooks (PyTorch's native allocator hands out blocks of segments it made with
 * cudaMalloc): recorded at the allocated level with the range open on the
 * calling thread, inside the segments that `--level reserved` records.
 * PSC_TENSOR_FREE is recorded when the allocator is asked to free (the block
 * is not reused before that). python/peakscope/trace_tracker.cpp calls
 * it from PyTorch's allocator trace tracker. Safe to call at any time; a
 * no-op while the recorder is not recording. */
#define PSC_TENSOR_ALLOC 1
#define PSC_TENSOR_FREE 2
void psc_record_tensor_event(int action, unsigned long long address, unsigned long long bytes, int device,
                             unsigned long long stream);

#ifdef __cplusplus
}
#endif
#endif /* PEAKSCOPE_H */

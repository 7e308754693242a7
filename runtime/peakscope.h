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

#ifdef __cplusplus
}
#endif
#endif /* PEAKSCOPE_H */

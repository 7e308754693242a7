// The public C API (peakscope.h), exported from the preloaded library.
#include "peakscope/peakscope.h"

#include "runtime/recorder.h"
#include "runtime/sys.h"

PSC_EXPORT void psc_range_push(const char* name) { psc::rt::record_range_push(name, psc::Api::kPscApi); }
PSC_EXPORT void psc_range_pop(void) { psc::rt::record_range_pop(psc::Api::kPscApi); }
PSC_EXPORT void psc_mark(const char* name, const char* json_payload) {
  psc::rt::record_mark(name, json_payload, psc::Api::kPscApi);
}
PSC_EXPORT void psc_flush(void) { psc::rt::flush(); }
PSC_EXPORT int psc_api_version(void) { return PSC_API_VERSION; }

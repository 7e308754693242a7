// NVTX instance "core": the default-domain API (see nvtx_clients.h).
#include "tests/nvtx/nvtx_clients.h"

namespace {

nvtxEventAttributes_t ascii_attributes(const char* message) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

}  // namespace

extern "C" {

int core_push(const char* message) { return nvtxRangePushA(message); }
int core_push_wide(const wchar_t* message) { return nvtxRangePushW(message); }
int core_push_ex(const char* message, int64_t payload) {
  nvtxEventAttributes_t a = ascii_attributes(message);
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = payload;
  return nvtxRangePushEx(&a);
}
int core_pop(void) { return nvtxRangePop(); }
nvtxRangeId_t core_start(const char* message) { return nvtxRangeStartA(message); }
void core_end(nvtxRangeId_t id) { nvtxRangeEnd(id); }
void core_mark(const char* message) { nvtxMarkA(message); }
void core_mark_wide(const wchar_t* message) { nvtxMarkW(message); }
void core_mark_int(const char* message, int64_t payload) {
  nvtxEventAttributes_t a = ascii_attributes(message);
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = payload;
  nvtxMarkEx(&a);
}
void core_mark_double(const char* message, double payload) {
  nvtxEventAttributes_t a = ascii_attributes(message);
  a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
  a.payload.dValue = payload;
  nvtxMarkEx(&a);
}
}

// NVTX instance "domains": domains and registered strings (see nvtx_clients.h).
#include "tests/nvtx/nvtx_clients.h"

namespace {

nvtxEventAttributes_t attributes() {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return a;
}

nvtxEventAttributes_t ascii_attributes(const char* message) {
  nvtxEventAttributes_t a = attributes();
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

nvtxEventAttributes_t registered_attributes(nvtxStringHandle_t message) {
  nvtxEventAttributes_t a = attributes();
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = message;
  return a;
}

}  // namespace

extern "C" {

nvtxDomainHandle_t domains_create(const char* name) { return nvtxDomainCreateA(name); }
nvtxDomainHandle_t domains_create_wide(const wchar_t* name) { return nvtxDomainCreateW(name); }
nvtxStringHandle_t domains_register(nvtxDomainHandle_t domain, const char* text) {
  return nvtxDomainRegisterStringA(domain, text);
}
nvtxStringHandle_t domains_register_wide(nvtxDomainHandle_t domain, const wchar_t* text) {
  return nvtxDomainRegisterStringW(domain, text);
}
int domains_push(nvtxDomainHandle_t domain, const char* message) {
  nvtxEventAttributes_t a = ascii_attributes(message);
  return nvtxDomainRangePushEx(domain, &a);
}
int domains_push_registered(nvtxDomainHandle_t domain, nvtxStringHandle_t message) {
  nvtxEventAttributes_t a = registered_attributes(message);
  return nvtxDomainRangePushEx(domain, &a);
}
int domains_pop(nvtxDomainHandle_t domain) { return nvtxDomainRangePop(domain); }
nvtxRangeId_t domains_start_registered(nvtxDomainHandle_t domain, nvtxStringHandle_t message) {
  nvtxEventAttributes_t a = registered_attributes(message);
  return nvtxDomainRangeStartEx(domain, &a);
}
void domains_end(nvtxDomainHandle_t domain, nvtxRangeId_t id) { nvtxDomainRangeEnd(domain, id); }
void domains_mark(nvtxDomainHandle_t domain, const char* message) {
  nvtxEventAttributes_t a = ascii_attributes(message);
  nvtxDomainMarkEx(domain, &a);
}
void domains_name_category(nvtxDomainHandle_t domain, uint32_t category, const char* name) {
  nvtxDomainNameCategoryA(domain, category, name);
}
void domains_destroy(nvtxDomainHandle_t domain) { nvtxDomainDestroy(domain); }
}

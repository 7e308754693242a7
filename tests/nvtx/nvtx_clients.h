// Shared objects, each compiled with its own copy of the nvtx3 headers, so
// that a program linking both (and using NVTX itself) holds three NVTX
// instances, as a PyTorch process does. Plain C entry points: the tests drive
// each instance through them.
#pragma once

#include <nvtx3/nvToolsExt.h>

extern "C" {

// libpsc_nvtx_core.so: the default-domain API.
int core_push(const char* message);
int core_push_wide(const wchar_t* message);
int core_push_ex(const char* message, int64_t payload);  // ASCII message with an INT64 payload
int core_pop(void);
nvtxRangeId_t core_start(const char* message);
void core_end(nvtxRangeId_t id);
void core_mark(const char* message);
void core_mark_wide(const wchar_t* message);
void core_mark_int(const char* message, int64_t payload);
void core_mark_double(const char* message, double payload);

// libpsc_nvtx_domains.so: domains and registered strings.
nvtxDomainHandle_t domains_create(const char* name);
nvtxDomainHandle_t domains_create_wide(const wchar_t* name);
nvtxStringHandle_t domains_register(nvtxDomainHandle_t domain, const char* text);
nvtxStringHandle_t domains_register_wide(nvtxDomainHandle_t domain, const wchar_t* text);
int domains_push(nvtxDomainHandle_t domain, const char* message);
int domains_push_registered(nvtxDomainHandle_t domain, nvtxStringHandle_t message);
int domains_pop(nvtxDomainHandle_t domain);
nvtxRangeId_t domains_start_registered(nvtxDomainHandle_t domain, nvtxStringHandle_t message);
void domains_end(nvtxDomainHandle_t domain, nvtxRangeId_t id);
void domains_mark(nvtxDomainHandle_t domain, const char* message);
void domains_name_category(nvtxDomainHandle_t domain, uint32_t category, const char* name);
void domains_destroy(nvtxDomainHandle_t domain);

// libpsc_nvtx_cuda.so: naming CUDA resources (driver API "cu", runtime API
// "cuda"); handles are passed as integers.
void cuda_name_cu_device(int device, const char* name);
void cuda_name_cu_context(uint64_t context, const char* name);
void cuda_name_cu_context_wide(uint64_t context, const wchar_t* name);
void cuda_name_cu_stream(uint64_t stream, const char* name);
void cuda_name_cu_event_wide(uint64_t event, const wchar_t* name);
void cuda_name_device(int device, const char* name);
void cuda_name_stream(uint64_t stream, const char* name);
void cuda_name_stream_wide(uint64_t stream, const wchar_t* name);
void cuda_name_event(uint64_t event, const char* name);
}

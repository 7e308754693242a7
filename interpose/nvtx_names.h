// How an NVTX call becomes a recorded name (and, for marks, a JSON payload).
// Names are built on the caller's stack: no heap, no stdio. The recorder
// interns them (a lookup for a name seen before).
//
//   default domain        the message unchanged ("forward/layer.3", "wave")
//   other domains         "<domain>::<message>" ("NCCL::AllReduce"), or the
//                         message alone with PEAKSCOPE_NVTX_DOMAINS=plain
//   UNICODE messages      converted to UTF-8
//   REGISTERED messages   the registered text (with its domain's prefix)
//   no message            "(unnamed)"; an unknown string handle "(unknown string)"
//
// Mark payloads: a message of the form `<name> {<json>}` is recorded as the
// mark <name> with payload {<json>} (so `nvtxMarkA("wave {\"tokens\": 8}")`
// carries a wave's payload); otherwise a numeric NVTX payload becomes
// {"payload": <number>}; otherwise there is none.
#pragma once

#ifndef NVTX_NO_IMPL
#define NVTX_NO_IMPL  // the NVTX types and ids only: a tool must not carry an NVTX instance of its own
#endif
#include <nvtx3/nvToolsExt.h>

#include "interpose/nvtx_registry.h"

namespace psc::interpose::nvtx {

struct NameBuffer {
  char text[kMaxName];
};

// UTF-32 (Linux wchar_t) to UTF-8, cut at a character boundary to fit `out`.
void wide_to_utf8(const wchar_t* wide, NameBuffer& out);

// The recorded name of `message` in a domain whose prefix is `prefix`. Returns
// `message` itself (no copy) when the prefix is empty.
const char* ascii_name(const char* prefix, const char* message, NameBuffer& out);
const char* wide_name(const char* prefix, const wchar_t* message, NameBuffer& out);
const char* attributes_name(const char* prefix, const nvtxEventAttributes_t* attributes, NameBuffer& out);

struct MarkText {
  const char* name;
  const char* payload;  // JSON, or nullptr
};
struct MarkBuffers {
  NameBuffer name;
  NameBuffer message;  // a UNICODE message, converted
  char payload[64];    // a numeric payload, formatted
};
MarkText mark_text(const char* prefix, const char* message, MarkBuffers& buffers);
MarkText mark_text(const char* prefix, const nvtxEventAttributes_t* attributes, MarkBuffers& buffers);

}  // namespace psc::interpose::nvtx

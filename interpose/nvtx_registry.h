// NVTX state shared by every NVTX instance in the process (each statically
// linked copy of the NVTX headers is one instance, and each initialises the
// injection separately): domains, registered strings and range ids.
//
// Domain and string handles are opaque to the application. Without a chained
// tool they are the addresses of our own copies of the names; with one, they
// are the handles the chained tool returned (so that every call reaching it —
// including extensions we do not see — carries handles it issued). Either way
// a handle maps to a recorded text through a lock-free table keyed by the
// handle value. Entries are never removed: a tool that reuses a handle value
// after nvtxDomainDestroy overwrites the entry at its next create.
//
// Memory comes from map_pages only (a bump arena for text, fixed tables);
// everything is bounded, and what does not fit is counted as a string drop.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace psc::interpose::nvtx {

// Longest recorded name in bytes, terminator included; longer names are cut.
constexpr size_t kMaxName = 512;

// How ranges and marks of a non-default domain are named.
enum class DomainNaming : uint8_t {
  kPrefixed,  // "<domain>::<message>" (default)
  kPlain,     // "<message>", as if the domain were the default one
};

// One-time set-up of the arena and tables. Safe to call repeatedly and from
// several threads; returns false when memory could not be mapped.
bool registry_init(DomainNaming naming);
DomainNaming domain_naming();

// Copies `text` (at most kMaxName - 1 bytes of it) after `prefix` into the
// arena; returns the stable copy or nullptr when the arena is full.
const char* store_text(const char* prefix, const char* text);

// Handle -> text maps. insert() overwrites an existing key; returns false when
// the table is full. lookup() returns nullptr for an unknown handle.
bool domain_insert(const void* handle, const char* prefix);
const char* domain_lookup(const void* handle);
bool string_insert(const void* handle, const char* text);
const char* string_lookup(const void* handle);

// The text recorded before names of `domain`: "" for the default domain (null
// handle) and in plain naming, "<name>::" otherwise.
const char* domain_prefix(const void* domain);

// Process-wide unique NVTX range ids (nvtxRangeStart*), never 0.
uint64_t next_range_id();

// With a chained tool: our range id -> the id the tool returned for the same
// start. A ring of 2^16 entries: an end whose start was more than 65536 starts
// ago is not forwarded (the trace is unaffected).
bool chained_ids_init();
void chained_id_remember(uint64_t ours, uint64_t theirs);
bool chained_id_lookup(uint64_t ours, uint64_t* theirs);

}  // namespace psc::interpose::nvtx

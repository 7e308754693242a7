// Interned strings (range names, mark payloads). Lock-free: a thread claims an
// empty slot with one CAS, copies the text into an mmap'd arena and publishes
// the id; lookups of known names touch no shared cache line for writing. The
// writer thread emits each string once, before any event that names it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace psc::rt {

// Returns the id of `text` (interning it on first use), or 0 when the table or
// arena is full (counted as a kStringTable drop).
uint32_t intern(const char* text);

// For the writer: the highest id handed out so far, and the text of an id once
// it is published (nullptr while another thread is still publishing it).
uint32_t strings_allocated();
const char* string_text(uint32_t id, size_t* length);

bool strings_init();

}  // namespace psc::rt

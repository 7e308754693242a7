// Writes pickles that Python's pickle module and pytorch.org/memory_viz both
// read. memory_viz has its own small unpickler (torch/utils/viz/MemoryViz.js,
// `unpickle`): protocol 2 to 4 and a fixed set of opcodes, so only these are
// written: PROTO 4, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS, APPENDS,
// SHORT_BINUNICODE, BINUNICODE, BININT1, BININT2, BININT, LONG1, BINFLOAT,
// NEWTRUE, NEWFALSE, NONE, TUPLE2, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET, STOP.
// Lists are filled in batches of at most kBatch items, as Python's pickler
// does: memory_viz spreads one batch into a JavaScript call's arguments, which
// overflows for large ones.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

namespace psc::pickle {

constexpr size_t kBatch = 1000;

class Writer {
 public:
  // memo_counter: shared by writers whose output is concatenated, so their
  // memo indices never collide.
  explicit Writer(uint64_t* memo_counter) : memo_(memo_counter) {}

  std::string& out() { return out_; }
  void clear() { out_.clear(); }

  void proto() { out_ += "\x80\x04"; }
  void stop() { out_ += '.'; }
  void mark() { out_ += '('; }
  void empty_dict() { out_ += '}'; }
  void empty_list() { out_ += ']'; }
  void setitems() { out_ += 'u'; }
  void appends() { out_ += 'e'; }
  void none() { out_ += 'N'; }
  void boolean(bool b) { out_ += b ? '\x88' : '\x89'; }
  void tuple2() { out_ += '\x86'; }

  void string(std::string_view s) {
    if (s.size() < 256) {
      out_ += '\x8c';
      out_ += static_cast<char>(s.size());
    } else {
      out_ += 'X';
      le(s.size(), 4);
    }
    out_.append(s.data(), s.size());
  }

  // A string written once and then referred to through the memo: dict keys
  // and action names repeat in every entry.
  void interned(std::string_view s) {
    auto it = interned_.find(std::string(s));
    if (it != interned_.end()) {
      if (it->second < 256) {
        out_ += 'h';
        out_ += static_cast<char>(it->second);
      } else {
        out_ += 'j';
        le(it->second, 4);
      }
      return;
    }
    string(s);
    const uint64_t index = (*memo_)++;
    if (index < 256) {
      out_ += 'q';
      out_ += static_cast<char>(index);
    } else {
      out_ += 'r';
      le(index, 4);
    }
    interned_.emplace(std::string(s), index);
  }

  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      out_ += 'K';
      out_ += static_cast<char>(v);
    } else if (v >= 0 && v < 65536) {
      out_ += 'M';
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
    } else {
      // LONG1: the fewest little-endian two's-complement bytes that keep the sign.
      int n = 1;
      while (n < 8) {
        const int64_t lo = -(int64_t{1} << (8 * n - 1)), hi = (int64_t{1} << (8 * n - 1)) - 1;
        if (v >= lo && v <= hi) break;
        ++n;
      }
      out_ += '\x8a';
      out_ += static_cast<char>(n);
      le(static_cast<uint64_t>(v), n);
    }
  }
  // BINFLOAT: the IEEE 754 double, big-endian.
  void real(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    out_ += 'G';
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  void integer(uint64_t v) {
    if (v <= static_cast<uint64_t>(INT64_MAX)) {
      integer(static_cast<int64_t>(v));
      return;
    }
    out_ += '\x8a';  // nine bytes: the top bit of a 64-bit value must not read as a sign
    out_ += '\x09';
    le(v, 8);
    out_ += '\0';
  }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }

  uint64_t* memo_;
  std::string out_;
  std::unordered_map<std::string, uint64_t> interned_;
};

}  // namespace psc::pickle

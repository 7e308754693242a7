// A reader for the subset of Python's pickle format that memory snapshots use
// (`torch.cuda.memory._dump_snapshot` is `pickle.dump` of a dict of lists,
// dicts, strings, ints, floats, bools, None and tuples). Data only: the
// opcodes that name a Python callable or build an object (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*) and every
// opcode snapshots do not use are refused with their byte offset, so no code
// is ever named, let alone run, from the file.
//
// Opcodes read (pickletools' names; protocols 2 to 5): PROTO FRAME STOP MARK
// EMPTY_DICT EMPTY_LIST EMPTY_TUPLE DICT LIST TUPLE TUPLE1 TUPLE2 TUPLE3
// SETITEM SETITEMS APPEND APPENDS NONE NEWTRUE NEWFALSE BININT BININT1 BININT2
// LONG1 LONG4 BINFLOAT SHORT_BINUNICODE BINUNICODE BINUNICODE8 SHORT_BINBYTES
// BINBYTES BINBYTES8 MEMOIZE BINPUT LONG_BINPUT BINGET LONG_BINGET.
//
// Values live in one arena and refer to each other by index: the memo can make
// two places share a value (pickle keeps object identity), even a container
// inside itself; readers follow known paths and never walk the graph blindly.
// Memory is bounded by the input: every value costs at least one input byte.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace psc::pickle {

enum class Type : uint8_t { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict };
const char* type_name(Type type);

using Ref = uint32_t;

struct Value {
  Type type = Type::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;        // kString (UTF-8 as pickled) and kBytes
  std::vector<Ref> items;  // kList, kTuple; kDict: key, value, key, value...
};

class Document {
 public:
  const Value& at(Ref r) const { return values_[r]; }
  Ref root() const { return root_; }
  // The dict entry with this string key, or nullptr.
  const Value* find(const Value& dict, std::string_view key) const;

 private:
  friend class Parser;
  std::vector<Value> values_;
  Ref root_ = 0;
};

// Thrown for anything the reader refuses; `offset` is the opcode's byte offset.
class ParseError : public std::runtime_error {
 public:
  ParseError(uint64_t offset, const std::string& reason) : std::runtime_error(reason), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

// Throws ParseError.
Document parse(std::string_view data);

}  // namespace psc::pickle

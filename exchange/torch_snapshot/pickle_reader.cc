#include "exchange/torch_snapshot/pickle_reader.h"

#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

namespace psc::pickle {

const char* type_name(Type type) {
  switch (type) {
    case Type::kNone: return "None";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kBytes: return "bytes";
    case Type::kList: return "list";
    case Type::kTuple: return "tuple";
    case Type::kDict: return "dict";
  }
  return "?";
}

const Value* Document::find(const Value& dict, std::string_view key) const {
  if (dict.type != Type::kDict) return nullptr;
  // Python keeps the last of equal keys; so do we.
  const Value* found = nullptr;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const Value& k = values_[dict.items[i]];
    if (k.type == Type::kString && k.text == key) found = &values_[dict.items[i + 1]];
  }
  return found;
}

class Parser {
 public:
  explicit Parser(std::string_view data) : data_(data) {}

  Document run() {
    while (true) {
      if (pos_ >= data_.size()) fail(pos_, "the pickle ends without STOP");
      op_ = pos_;
      const uint8_t op = byte();
      if (op == '.') return stop();
      if (!structure(op) && !scalar(op)) refuse(op);
    }
  }

 private:
  // The protocol, frames, containers and the memo: true when `op` is one of them.
  bool structure(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t v = byte();
        if (v < 2 || v > 5) fail(op_, fmt::format("pickle protocol {} (snapshots use 2 to 5)", v));
        break;
      }
      case 0x95: skip(fixed(8)); break;  // FRAME: a length hint, nothing to do
      case '(': marks_.push_back(stack_.size()); break;
      case '}': push(make(Type::kDict)); break;
      case ']': push(make(Type::kList)); break;
      case ')': push(make(Type::kTuple)); break;
      case 'd': collect(Type::kDict); break;
      case 'l': collect(Type::kList); break;
      case 't': collect(Type::kTuple); break;
      case 0x85: tuple_of(1); break;
      case 0x86: tuple_of(2); break;
      case 0x87: tuple_of(3); break;
      case 's': {
        need(3);
        const Ref value = pop(), key = pop();
        add_items(top(), {key, value}, Type::kDict);
        break;
      }
      case 'u': add_marked(Type::kDict); break;
      case 'a': {
        need(2);
        const Ref value = pop();
        add_items(top(), {value}, Type::kList);
        break;
      }
      case 'e': add_marked(Type::kList); break;
      case 0x94:  // MEMOIZE
        need(1);
        memo_[memo_.size()] = top();
        break;
      case 'q': put(byte()); break;
      case 'r': put(fixed(4)); break;
      case 'h': get(byte()); break;
      case 'j': get(fixed(4)); break;
      default: return false;
    }
    return true;
  }

  // None, bools, numbers, strings and bytes: true when `op` is one of them.
  bool scalar(uint8_t op) {
    switch (op) {
      case 'N': push(make(Type::kNone)); break;
      case 0x88:
      case 0x89: {
        const Ref r = make(Type::kBool);
        doc_.values_[r].boolean = op == 0x88;
        push(r);
        break;
      }
      case 'J': integer(static_cast<int32_t>(static_cast<uint32_t>(fixed(4)))); break;
      case 'K': integer(byte()); break;
      case 'M': integer(static_cast<int64_t>(fixed(2))); break;
      case 0x8a: long_integer(byte()); break;
      case 0x8b: long_integer(fixed(4)); break;
      case 'G': {
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();  // big-endian
        const Ref r = make(Type::kFloat);
        std::memcpy(&doc_.values_[r].real, &bits, sizeof bits);
        push(r);
        break;
      }
      case 0x8c: text(Type::kString, byte()); break;
      case 'X': text(Type::kString, fixed(4)); break;
      case 0x8d: text(Type::kString, fixed(8)); break;
      case 'C': text(Type::kBytes, byte()); break;
      case 'B': text(Type::kBytes, fixed(4)); break;
      case 0x8e: text(Type::kBytes, fixed(8)); break;
      default: return false;
    }
    return true;
  }

  // Any other opcode: those that name or build a Python object say so.
  [[noreturn]] void refuse(uint8_t op) const {
    switch (op) {
      case 'c':
      case 0x93:
      case 'R':
      case 'b':
      case 'i':
      case 'o':
      case 0x81:
      case 0x92:
      case 'P':
      case 'Q':
      case 0x82:
      case 0x83:
      case 0x84:
        fail(op_, fmt::format("opcode 0x{:02x} names or builds a Python object; a memory snapshot holds only data, "
                              "so this file is refused",
                              op));
      default: fail(op_, fmt::format("opcode 0x{:02x} is not one memory snapshots use", op));
    }
  }

  [[noreturn]] static void fail(uint64_t offset, const std::string& reason) { throw ParseError(offset, reason); }

  uint8_t byte() {
    if (pos_ >= data_.size()) fail(op_, "the pickle ends inside an opcode");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t fixed(int n) {  // little-endian
    if (data_.size() - pos_ < static_cast<size_t>(n)) fail(op_, "the pickle ends inside an opcode");
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  void skip(uint64_t n) { (void)n; }  // frames are read straight through

  Ref make(Type type) {
    Value v;
    v.type = type;
    doc_.values_.push_back(std::move(v));
    return static_cast<Ref>(doc_.values_.size() - 1);
  }
  void push(Ref r) { stack_.push_back(r); }
  Ref pop() {
    const Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref top() const { return stack_.back(); }
  // At least n values above the innermost mark.
  void need(size_t n) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail(op_, "the pickle's stack is too short for this opcode");
  }

  void integer(int64_t v) {
    const Ref r = make(Type::kInt);
    doc_.values_[r].integer = v;
    push(r);
  }
  void long_integer(uint64_t n) {
    if (n > 8) fail(op_, fmt::format("an integer of {} bytes; snapshots hold 64-bit integers", n));
    if (data_.size() - pos_ < n) fail(op_, "the pickle ends inside an opcode");
    uint64_t v = 0;
    for (uint64_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    // Two's complement of n bytes: sign-extend.
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
    pos_ += n;
    integer(static_cast<int64_t>(v));
  }
  void text(Type type, uint64_t n) {
    if (data_.size() - pos_ < n) fail(op_, fmt::format("a string of {} bytes runs past the end of the pickle", n));
    const Ref r = make(type);
    doc_.values_[r].text.assign(data_.data() + pos_, n);
    pos_ += n;
    push(r);
  }

  std::vector<Ref> take_marked() {
    if (marks_.empty()) fail(op_, "the pickle closes a MARK it never opened");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + static_cast<ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  void collect(Type type) {
    std::vector<Ref> items = take_marked();
    if (type == Type::kDict && items.size() % 2) fail(op_, "a dict with a key and no value");
    const Ref r = make(type);
    doc_.values_[r].items = std::move(items);
    push(r);
  }
  void tuple_of(size_t n) {
    need(n);
    const Ref r = make(Type::kTuple);
    std::vector<Ref> items(stack_.end() - static_cast<ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    doc_.values_[r].items = std::move(items);
    push(r);
  }
  void add_items(Ref target, std::initializer_list<Ref> items, Type want) {
    Value& t = doc_.values_[target];
    if (t.type != want) fail(op_, fmt::format("adds items to a {}, not a {}", type_name(t.type), type_name(want)));
    t.items.insert(t.items.end(), items.begin(), items.end());
  }
  void add_marked(Type want) {
    std::vector<Ref> items = take_marked();
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      fail(op_, "the pickle's stack is too short for this opcode");
    if (want == Type::kDict && items.size() % 2) fail(op_, "a dict with a key and no value");
    Value& t = doc_.values_[top()];
    if (t.type != want) fail(op_, fmt::format("adds items to a {}, not a {}", type_name(t.type), type_name(want)));
    t.items.insert(t.items.end(), items.begin(), items.end());
  }

  void put(uint64_t index) {
    need(1);
    memo_[index] = top();
  }
  void get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(op_, fmt::format("memo entry {} is read before it is written", index));
    push(it->second);
  }

  Document stop() {
    if (!marks_.empty()) fail(op_, "STOP inside an open MARK");
    if (stack_.size() != 1) fail(op_, fmt::format("STOP with {} values on the stack (one expected)", stack_.size()));
    doc_.root_ = stack_.back();
    return std::move(doc_);
  }

  std::string_view data_;
  size_t pos_ = 0;
  size_t op_ = 0;
  Document doc_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
};

Document parse(std::string_view data) { return Parser(data).run(); }

}  // namespace psc::pickle

#include "exchange/perfetto/perfetto_packets.h"

#include <stdexcept>

namespace psc::perfetto {
namespace {

constexpr const char* kArgNames[] = {"bytes", "address", "range", "payload"};

}  // namespace

uint64_t Interning::category(Category c) {
  bool fresh = false;
  const uint64_t iid = event_names_.iid(static_cast<size_t>(c), &fresh);
  if (fresh) add(interned::kEventNames, iid, category_name(c));
  return iid;
}

uint64_t Interning::name(StringId id, const TraceMeta& meta) {
  bool fresh = false;
  const uint64_t iid = event_names_.iid(kCategoryCount + size_t{id.value}, &fresh);
  if (fresh) add(interned::kEventNames, iid, meta.string(id));
  return iid;
}

uint64_t Interning::arg(Arg arg) {
  bool fresh = false;
  const uint64_t iid = arg_names_.iid(arg, &fresh);
  if (fresh) add(interned::kAnnotationNames, iid, kArgNames[arg]);
  return iid;
}

uint64_t Interning::string_value(StringId id, const TraceMeta& meta) {
  bool fresh = false;
  const uint64_t iid = string_values_.iid(id.value, &fresh);
  if (fresh) add(interned::kAnnotationStringValues, iid, meta.string(id));
  return iid;
}

void Interning::add(uint32_t table, uint64_t iid, std::string_view name) {
  entry_.clear();
  entry_.varint(interned::kIid, iid);
  entry_.string(interned::kName, name);
  pending_.message(table, entry_);
}

void PacketBundles::flush() {
  if (pending_.empty()) return;
  const std::string& packets = pending_.data();
  const size_t bound = deflateBound(&stream_, packets.size());
  if (compressed_.size() < bound) compressed_.resize(bound);
  stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packets.data()));
  stream_.avail_in = static_cast<uInt>(packets.size());
  stream_.next_out = reinterpret_cast<Bytef*>(compressed_.data());
  stream_.avail_out = static_cast<uInt>(compressed_.size());
  // One call with room for deflateBound bytes always ends the stream.
  if (deflate(&stream_, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("zlib: deflate failed");
  const size_t size = compressed_.size() - stream_.avail_out;
  deflateReset(&stream_);
  pending_.clear();
  write_outer(size);
}

void PacketBundles::write_outer(size_t size) {
  field_.clear();
  field_.key(packet::kCompressedPackets, proto::kWireBytes);
  field_.raw_varint(size);
  outer_.clear();
  outer_.key(trace::kPacket, proto::kWireBytes);
  outer_.raw_varint(field_.size() + size);
  out_.write(outer_.data());
  out_.write(field_.data());
  out_.write(compressed_.data(), size);
}

}  // namespace psc::perfetto

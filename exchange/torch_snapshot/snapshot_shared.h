// What the torch-snapshot importer and exporter agree on beyond the trace
// format: the marks that carry what a trace has no field for, and how mapped
// address ranges are followed.
//
// Marks (payload JSON; an import writes them, an export of a trace imported
// from a snapshot writes them back):
//   kFieldsMark      the extra scalar fields (user_metadata, compile_context,
//                    ...) of the device's memory entries from here on; written
//                    before the first entry whose fields differ from the last.
//                    PyTorch sets user_metadata for what follows
//                    (_set_memory_metadata), so changes are rare.
//   kSegmentMark     one segment of `segments` at snapshot time, blocks
//                    included (address, size, requested_size, state), frames
//                    left out.
//   kSettingsMark    `allocator_settings`.
// They are not "torch.<action>" marks: those become history entries.
//
// Mapped ranges: the pieces of PyTorch's expandable segments (segment_map /
// segment_unmap) and of the recorder's VMM mappings (cuMemMap / cuMemUnmap).
// A map adds a piece; an unmap removes an address range, which may cut a
// piece (PyTorch maps a block's pages at once and unmaps them block by block
// later) or span several, and may cover addresses no piece holds (mapped
// before the history began).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string_view>

namespace psc {

inline constexpr std::string_view kFieldsMark = "torch-snapshot.fields";
inline constexpr std::string_view kSegmentMark = "torch-snapshot.segment";
inline constexpr std::string_view kSettingsMark = "torch-snapshot.allocator_settings";

// One per device.
class MappedRanges {
 public:
  struct Piece {
    uint64_t address;
    uint64_t bytes;
    uint64_t end() const { return end_of(address, bytes); }
  };
  // The end of a range, saturated: a damaged or hostile input may name one
  // past the top of the address space.
  static uint64_t end_of(uint64_t address, uint64_t bytes) {
    return bytes > UINT64_MAX - address ? UINT64_MAX : address + bytes;
  }

  // Adds [address, address + bytes); the caller makes sure it overlaps no piece.
  void add(uint64_t address, uint64_t bytes) {
    if (bytes) pieces_[address] = bytes;
  }

  // The piece holding `address`, if any.
  bool find(uint64_t address, Piece* piece) const {
    auto it = pieces_.upper_bound(address);
    if (it == pieces_.begin()) return false;
    --it;
    if (address >= end_of(it->first, it->second)) return false;
    *piece = {it->first, it->second};
    return true;
  }

  // Removes [address, address + bytes). For each piece it touches:
  // removed(piece), then kept(remnant) for the part of the piece on either
  // side that stays mapped; for each stretch no piece held: uncovered(stretch).
  // Everything is reported in address order.
  template <typename Removed, typename Kept, typename Uncovered>
  void remove(uint64_t address, uint64_t bytes, Removed removed, Kept kept, Uncovered uncovered) {
    if (bytes == 0) return;
    const uint64_t end = end_of(address, bytes);
    auto it = pieces_.upper_bound(address);
    if (it != pieces_.begin() && end_of(std::prev(it)->first, std::prev(it)->second) > address) --it;
    uint64_t at = address;
    while (it != pieces_.end() && it->first < end) {
      const Piece piece{it->first, it->second};
      it = pieces_.erase(it);
      if (piece.address > at) uncovered(Piece{at, piece.address - at});
      removed(piece);
      if (piece.address < address) {
        kept(Piece{piece.address, address - piece.address});
        pieces_[piece.address] = address - piece.address;
      }
      if (piece.end() > end) {
        kept(Piece{end, piece.end() - end});
        it = pieces_.emplace(end, piece.end() - end).first;
        ++it;
      }
      at = std::max(at, std::min(piece.end(), end));
    }
    if (at < end) uncovered(Piece{at, end - at});
  }

  // Calls uncovered(stretch) for each part of [address, address + bytes) no
  // piece holds, in address order; changes nothing.
  template <typename Uncovered>
  void gaps(uint64_t address, uint64_t bytes, Uncovered uncovered) const {
    const uint64_t end = end_of(address, bytes);
    auto it = pieces_.upper_bound(address);
    if (it != pieces_.begin() && end_of(std::prev(it)->first, std::prev(it)->second) > address) --it;
    uint64_t at = address;
    for (; it != pieces_.end() && it->first < end; ++it) {
      if (it->first > at) uncovered(Piece{at, it->first - at});
      at = std::max(at, std::min(end_of(it->first, it->second), end));
    }
    if (at < end) uncovered(Piece{at, end - at});
  }

  // Pieces in address order.
  const std::map<uint64_t, uint64_t>& pieces() const { return pieces_; }

 private:
  std::map<uint64_t, uint64_t> pieces_;  // address -> bytes
};

}  // namespace psc

// Lining up one moment's events across waves of different sizes
// (WaveLiveness::moment_events): calibration fits each event's growth on its
// own, so the events it pairs across sizes must be the same allocation's.
//
// Events line up by their allocations, not their index, along the longest
// common subsequence of each wave's allocations with those of the wave of the
// most events: a program may make an allocation earlier at one size than at
// another (a library's own choice by size), and pairing events by index would
// then pair different allocations from there on. An event one wave makes and
// another does not is folded into the shared event before it. Only a few
// events may be left out this way: where more than two, and more than one in
// twenty, of a wave's events find no like in every other wave (per-sequence
// tensors of packings, allocations rounded up), the waves run different
// programs, and their events line up by index where every wave has as many,
// and not at all otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "estimator/growth.h"
#include "estimator/liveness.h"

namespace psc {

// One wave's events of one moment, and the allocation behind each (null, or
// not one per event: unknown); of a layer's, the first event with the
// layer's own gradients made (-1: the wave made none there).
struct EventSeries {
  WaveSize size;
  const std::vector<int64_t>* events = nullptr;
  const std::vector<WaveLiveness::EventAllocation>* allocations = nullptr;
  int64_t gradient_from = -1;
};

// Two allocations, of waves of sizes `a` and `b`, are taken for the same
// when their bytes are equal or in proportion to one of the sizes' features
// (tokens, squared lengths, the longest one's square, sequences): what one
// tensor's bytes are.
bool same_allocation(uint64_t x, const WaveSize& a, uint64_t y, const WaveSize& b);

// Per wave, the index among its own events of each event every wave shares,
// ascending; empty when they do not line up (or a wave has no events).
std::vector<std::vector<size_t>> line_up_events(const std::vector<EventSeries>& waves);

// A wave's values of the shared events: of shared event k, the most of the
// wave's events from kept[k] to kept[k + 1] (the first also from the wave's
// first event), so an allocation made at this size only still counts.
std::vector<int64_t> folded(const std::vector<int64_t>& events, const std::vector<size_t>& kept);

// Of the shared events (`kept`, as line_up_events gives them), those at
// which the waves that made the layer's gradients made them, the same for
// every one of those waves; empty when they disagree, when one of them is
// not shared, or when none made any.
std::vector<size_t> gradient_events(const std::vector<EventSeries>& waves,
                                    const std::vector<std::vector<size_t>>& kept);

// An accumulating wave's events as a gradient wave would have them: the
// temporary made where gradient waves make a gradient (shared event g, the
// wave's event kept[g]) is freed soon after, where the gradient stays; from
// its free on, it is counted as if it stayed.
std::vector<int64_t> as_if_gradients_stayed(const EventSeries& wave, const std::vector<size_t>& kept,
                                            const std::vector<size_t>& gradient_at);

}  // namespace psc

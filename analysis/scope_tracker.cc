#include "analysis/scope_tracker.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/json_file.h"

namespace psc {
namespace {

std::optional<int64_t> integer_field(const nlohmann::json& object, const char* key, std::string* error) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    const double v = it->get<double>();
    if (std::isfinite(v) && std::fabs(v) < 9.0e18 && v == std::floor(v)) return static_cast<int64_t>(v);
  }
  if (error->empty()) *error = std::string("\"") + key + "\" is not an integer";
  return std::nullopt;
}

// "sequence_lengths", when given: positive integers adding up to the tokens.
void check_lengths(const nlohmann::json& j, WavePayload* p) {
  auto it = j.find("sequence_lengths");
  if (it == j.end() || it->is_null()) return;
  int64_t sum = 0;
  bool whole = it->is_array() && !it->empty();
  if (whole)
    for (const auto& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 40)) {
        whole = false;
        break;
      }
      sum += v.get<int64_t>();
      if (sum > (int64_t{1} << 40)) {
        whole = false;
        break;
      }
    }
  if (whole && (!p->tokens || sum == *p->tokens)) return;
  p->bad_lengths = true;
  if (!p->error.empty()) return;
  p->error = whole ? "\"sequence_lengths\" add up to " + std::to_string(sum) + ", not to the " +
                         std::to_string(*p->tokens) + " tokens"
                   : "\"sequence_lengths\" is not a list of positive integers";
}

}  // namespace

WavePayload parse_wave_payload(std::string_view text) {
  WavePayload p;
  p.present = true;
  p.raw = std::string(text);
  if (json_nested_deeper_than(text, kMaxJsonDepth)) {
    p.error = "payload nests deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return p;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    p.error = "payload is not valid JSON";
    return p;
  }
  if (!j.is_object()) {
    p.error = "payload is not a JSON object";
    return p;
  }
  p.tokens = integer_field(j, "tokens", &p.error);
  if (p.tokens && *p.tokens <= 0 && p.error.empty()) p.error = "\"tokens\" is not a positive count";
  if (auto it = j.find("groups"); it != j.end() && it->is_array()) {
    // Each group's own size (the list form): the count, and the tokens when
    // the payload leaves them to the groups.
    int64_t sum = 0;
    for (const auto& group : *it) {
      const std::optional<int64_t> tokens = group.is_object() ? integer_field(group, "tokens", &p.error) : std::nullopt;
      if (!tokens || *tokens <= 0) {
        if (p.error.empty()) p.error = "\"groups\" lists a group without a positive \"tokens\"";
        sum = -1;
        break;
      }
      sum += *tokens;
    }
    if (sum >= 0) {
      p.groups = static_cast<int64_t>(it->size());
      if (!p.tokens) p.tokens = sum;
    }
  } else {
    p.groups = integer_field(j, "groups", &p.error);
  }
  if (auto it = j.find("cold"); it != j.end() && !it->is_null()) {
    if (it->is_boolean())
      p.cold = it->get<bool>();
    else if (p.error.empty())
      p.error = "\"cold\" is not a boolean";
  }
  if (auto it = j.find("slots"); it != j.end() && !it->is_null()) {
    if (it->is_array()) {
      for (const auto& slot : *it) p.slots.push_back(slot.is_string() ? slot.get<std::string>() : slot.dump());
    } else if (p.error.empty()) {
      p.error = "\"slots\" is not an array";
    }
  }
  check_lengths(j, &p);
  return p;
}

int32_t ScopeTracker::begin_wave(const Event& e, uint64_t ordinal) {
  WaveSpan w;
  w.index = static_cast<int32_t>(waves_.size());
  if (!open_waves_.empty()) {
    w.overlapped = open_waves_.back();
    int32_t& other = waves_[static_cast<size_t>(open_waves_.back())].overlapped;
    if (other < 0) other = w.index;
  }
  w.thread = e.thread;
  w.begin_ordinal = ordinal;
  w.begin_seq = e.seq;
  w.begin_time_ns = e.time_ns;
  waves_.push_back(std::move(w));
  open_waves_.push_back(waves_.back().index);
  return waves_.back().index;
}

void ScopeTracker::end_wave(int32_t wave, const Event& e, uint64_t ordinal) {
  WaveSpan& w = waves_[static_cast<size_t>(wave)];
  w.ended = true;
  w.end_ordinal = ordinal;
  w.end_seq = e.seq;
  w.end_time_ns = e.time_ns;
  open_waves_.erase(std::find(open_waves_.begin(), open_waves_.end(), wave));
}

void ScopeTracker::attach_payload(const Event& e, const TraceMeta& meta) {
  // The mark comes right after the push on the same thread; prefer the newest
  // open wave of that thread still waiting for its payload.
  WaveSpan* target = nullptr;
  for (auto it = open_waves_.rbegin(); it != open_waves_.rend(); ++it) {
    WaveSpan& w = waves_[static_cast<size_t>(*it)];
    if (w.payload.present) continue;
    if (w.thread == e.thread) {
      target = &w;
      break;
    }
    if (!target) target = &w;
  }
  if (target && !e.payload.empty()) target->payload = parse_wave_payload(meta.string(e.payload));
}

ScopeTracker::Update ScopeTracker::push(const Event& e, uint64_t ordinal, const TraceMeta& meta) {
  if (e.thread >= threads_.size()) threads_.resize(e.thread + 1);
  ThreadStack& stack = threads_[e.thread];
  if (stack.frames.size() >= kMaxDepth) {
    ++stack.overflow;
    return {};
  }
  if (is_wave(e.name, meta)) {
    const int32_t wave = begin_wave(e, ordinal);
    stack.frames.push_back({e.name, wave, ordinal});
    ++open_frames_;
    return {Change::kWaveBegin, wave};
  }
  stack.frames.push_back({e.name, -1, ordinal});
  ++open_frames_;
  return {};
}

ScopeTracker::Update ScopeTracker::pop(const Event& e, uint64_t ordinal) {
  if (e.thread >= threads_.size() || (threads_[e.thread].frames.empty() && threads_[e.thread].overflow == 0)) {
    ++unmatched_pops_;
    return {};
  }
  ThreadStack& stack = threads_[e.thread];
  if (stack.overflow > 0) {
    --stack.overflow;
    return {};
  }
  const Frame frame = stack.frames.back();
  stack.frames.pop_back();
  --open_frames_;
  if (frame.wave < 0) return {};
  end_wave(frame.wave, e, ordinal);
  return {Change::kWaveEnd, frame.wave};
}

ScopeTracker::Update ScopeTracker::start(const Event& e, uint64_t ordinal, const TraceMeta& meta) {
  if (open_ranges_.size() >= kMaxOpenRanges) return {};
  if (is_wave(e.name, meta)) {
    const int32_t wave = begin_wave(e, ordinal);
    if (!e.payload.empty()) waves_.back().payload = parse_wave_payload(meta.string(e.payload));
    open_ranges_.push_back({e.address, e.name, wave, ordinal});
    return {Change::kWaveBegin, wave};
  }
  open_ranges_.push_back({e.address, e.name, -1, ordinal});
  return {};
}

ScopeTracker::Update ScopeTracker::finish_range(const Event& e, uint64_t ordinal) {
  for (auto it = open_ranges_.rbegin(); it != open_ranges_.rend(); ++it) {
    if (it->id != e.address) continue;
    const int32_t wave = it->wave;
    open_ranges_.erase(std::next(it).base());
    if (wave < 0) return {};
    end_wave(wave, e, ordinal);
    return {Change::kWaveEnd, wave};
  }
  ++unmatched_pops_;
  return {};
}

StringId ScopeTracker::latest_open_range() const {
  StringId latest;
  uint64_t latest_ordinal = 0;
  bool any = false;
  auto consider = [&](StringId name, uint64_t ordinal) {
    if (any && ordinal < latest_ordinal) return;
    latest = name;
    latest_ordinal = ordinal;
    any = true;
  };
  for (const ThreadStack& stack : threads_)
    if (!stack.frames.empty()) consider(stack.frames.back().name, stack.frames.back().ordinal);
  if (!open_ranges_.empty()) consider(open_ranges_.back().name, open_ranges_.back().ordinal);
  return latest;
}

StringId ScopeTracker::closing_range(const Event& e) const {
  if (e.kind == EventKind::kRangePop) {
    if (e.thread >= threads_.size()) return {};
    const ThreadStack& stack = threads_[e.thread];
    if (stack.overflow > 0 || stack.frames.empty()) return {};
    return stack.frames.back().name;
  }
  if (e.kind == EventKind::kRangeEnd) {
    for (auto it = open_ranges_.rbegin(); it != open_ranges_.rend(); ++it)
      if (it->id == e.address) return it->name;
  }
  return {};
}

ScopeTracker::Update ScopeTracker::on_event(const Event& e, uint64_t ordinal, const TraceMeta& meta) {
  switch (e.kind) {
    case EventKind::kRangePush: return push(e, ordinal, meta);
    case EventKind::kRangePop: return pop(e, ordinal);
    case EventKind::kRangeStart: return start(e, ordinal, meta);
    case EventKind::kRangeEnd: return finish_range(e, ordinal);
    case EventKind::kMark:
      if (is_wave(e.name, meta)) attach_payload(e, meta);
      return {};
    default: return {};
  }
}

}  // namespace psc

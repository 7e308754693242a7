// What `peakscope top` shows (cli/top_render.h): the wave table with each
// wave's price, growth across steps, the screen of one trace and of a run,
// and the lines printed instead of a screen.
#include "cli/top_render.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "analysis/layer_fold.h"
#include "analysis/report_text.h"
#include "common/bytes.h"
#include "estimator/predict.h"

namespace psc::cli {

std::optional<int64_t> Pricer::price(const LiveWave& w, std::string* why) const {
  if (!calibration || !w.payload.tokens || *w.payload.tokens <= 0) return std::nullopt;
  WaveRequest request;
  request.tokens = *w.payload.tokens;
  request.cold = w.payload.cold.value_or(false);
  request.gradients_exist = w.after_a_wave_of_its_step;
  const int64_t groups = w.payload.groups.value_or(1);
  if (groups > 1) {
    // Slots the calibration does not know are charged its largest gradients.
    request.slots = static_cast<int64_t>(w.payload.slots.size()) == groups
                        ? w.payload.slots
                        : std::vector<std::string>(static_cast<size_t>(groups), "(unnamed)");
  }
  try {
    return predict(*calibration, request).price.raw_bytes;
  } catch (const std::exception& e) {
    *why = e.what();
    return std::nullopt;
  }
}

std::string admitted_line(const Calibration& calibration, int64_t budget) {
  try {
    WaveRequest shape;
    const pricing::Admission a = admit_wave(calibration, shape, 0, int64_t{1} << 20, budget);
    return fmt::format("largest wave that fits in {}: {} tokens (in one sequence)", format_bytes(budget), a.tokens);
  } catch (const std::exception& e) {
    return fmt::format("largest wave that fits in {}: not priced: {}", format_bytes(budget), e.what());
  }
}

namespace {

std::string mib(uint64_t bytes) { return format_bytes(bytes); }

std::string seconds(uint64_t t, uint64_t first) {
  return t >= first ? fmt::format("+{:.1f} s", static_cast<double>(t - first) / 1e9) : "-";
}

// "0-30 100.94 KiB each" rows: consecutive layers holding the same bytes
// folded (analysis/layer_fold.h); layers holding none left out.
std::vector<std::string> layer_lines(const std::vector<uint64_t>& layers) {
  std::vector<std::string> out;
  const auto joins = [&](size_t first, size_t next) { return layers[next] == layers[first]; };
  fold_layer_rows(layers.size(), joins, [&](size_t first, size_t last) {
    if (layers[first] == 0) return;
    out.push_back(fmt::format("{:>9} {:>12}{}", layer_span(static_cast<int64_t>(first), static_cast<int64_t>(last)),
                              mib(layers[first]), last > first ? " each" : ""));
  });
  return out;
}

struct WaveText {
  std::string line;
  bool over_price = false;
};

std::string wave_header(const Pricer& pricer) {
  return fmt::format("{:>5} {:>7} {:>4} {:>12} {:>12} {:>12} {:>14}{}  peak in", "wave", "tokens", "cold", "baseline",
                     "peak", "measured", "measured bytes",
                     pricer.calibration ? fmt::format(" {:>12} {:>9}", "price", "error") : "");
}

WaveText wave_text(const LiveWave& w, const Pricer& pricer) {
  const std::string tokens = w.payload.tokens ? std::to_string(*w.payload.tokens) : "-";
  const std::string cold = w.payload.cold ? (*w.payload.cold ? "yes" : "no") : "-";
  WaveText t;
  t.line = fmt::format("{:>5} {:>7} {:>4} {:>12} {:>12} {:>12} {:>14}", w.index, tokens, cold, mib(w.baseline_bytes),
                       mib(w.peak_bytes), mib(w.measured_bytes()), w.measured_bytes());
  std::string why;
  if (!w.ended) {
    t.line += "  (running)";
  } else if (const std::optional<int64_t> price = pricer.price(w, &why)) {
    const double error =
        w.measured_bytes() ? static_cast<double>(*price) / static_cast<double>(w.measured_bytes()) - 1 : 0.0;
    t.over_price = static_cast<uint64_t>(*price) < w.measured_bytes();
    t.line += fmt::format(" {:>12} {:>+8.2f}%{}", mib(static_cast<uint64_t>(*price)), error * 100,
                          t.over_price ? "  PEAK OVER ITS PRICE" : "");
  } else if (!why.empty()) {
    t.line += "  not priced: " + why;
  }
  if (!w.peak_range.empty()) t.line += "  " + w.peak_range;
  return t;
}

// Growth across optimizer steps so far (analysis/live_view.h): the ranges
// whose live bytes rose step after step, or why nothing is said yet.
std::vector<std::string> growth_lines(const LiveSnapshot& s) {
  std::vector<std::string> out;
  if (s.steps_compared < 2) return out;
  if (s.growing.empty()) {
    out.push_back(fmt::format("growth across optimizer steps: nothing grows over {} steps", s.steps_compared));
    return out;
  }
  out.push_back(fmt::format("growth across optimizer steps ({} compared): GROWING", s.steps_compared));
  for (const LiveSnapshot::Growing& g : s.growing)
    out.push_back(fmt::format("  {:>12}/step  {:>12} live  {}", mib(g.bytes_per_step), mib(g.live_bytes),
                              g.range.empty() ? "(no range)" : g.range));
  return out;
}

std::string rank_text(int rank) { return rank >= 0 ? std::to_string(rank) : "-"; }

}  // namespace

void LinePrinter::update(const LiveSnapshot& s, const FollowStatus& follow, const std::string& label) {
  const std::string prefix = label.empty() ? std::string() : "[" + label + "] ";
  if (!header_) {
    std::printf("%s%s\n", prefix.c_str(), wave_header(pricer_).c_str());
    header_ = true;
  }
  for (; printed_waves_ < s.waves.size() && s.waves[printed_waves_].ended; ++printed_waves_) {
    const WaveText t = wave_text(s.waves[printed_waves_], pricer_);
    std::printf("%s%s\n", prefix.c_str(), t.line.c_str());
  }
  std::string growing;
  for (const LiveSnapshot::Growing& g : s.growing) growing += g.range + ";";
  if (growing != last_growing_) {
    for (const std::string& l : growth_lines(s)) std::printf("%s%s\n", prefix.c_str(), l.c_str());
    last_growing_ = growing;
  }
  if (s.live_bytes != last_live_ || s.peak_bytes != last_peak_) {
    std::printf("%s%s\n", prefix.c_str(),
                fmt::format("[{}] live {} in {} allocations, peak {}{}; {} events, {}",
                            seconds(s.last_time_ns, s.first_time_ns), mib(s.live_bytes), grouped(s.live_allocations),
                            mib(s.peak_bytes), s.peak_range.empty() ? "" : " in " + s.peak_range, grouped(s.events),
                            follow_state_name(follow.state))
                    .c_str());
    last_live_ = s.live_bytes;
    last_peak_ = s.peak_bytes;
  }
  std::fflush(stdout);
}

std::vector<std::string> screen_lines(const std::string& path, const FollowStatus& follow, const LiveView& view,
                                      const LiveSnapshot& s, const TopOptions& o, const Pricer& pricer,
                                      double events_per_s, bool final) {
  std::vector<std::string> out;
  const TraceMeta& meta = view.meta();
  const size_t host_length = strnlen(meta.header.hostname, sizeof meta.header.hostname);
  out.push_back(fmt::format(
      "peakscope top  {}  pid {} on {}  {}{}", path, meta.header.pid, std::string(meta.header.hostname, host_length),
      follow_state_name(follow.state),
      follow.state == FollowStatus::State::kWaiting && !follow.reason.empty() ? " (" + follow.reason + ")" : ""));
  out.push_back(fmt::format(
      "events {} ({:.0f}/s), {} of the file read, {} level{}", grouped(s.events), events_per_s, mib(follow.bytes),
      memory_level_name(s.level),
      s.deferred_left_out ? fmt::format("; {} CUPTI-only events left to `report`", grouped(s.deferred_left_out)) : ""));
  out.push_back(fmt::format("live now   {} in {} allocations", mib(s.live_bytes), grouped(s.live_allocations)));
  out.push_back(fmt::format("peak       {} ({} bytes) at {}{}", mib(s.peak_bytes), s.peak_bytes,
                            seconds(s.peak_time_ns, s.first_time_ns),
                            s.peak_range.empty() ? "" : " in " + s.peak_range));
  out.push_back("");
  out.push_back("live now by where it was made");
  for (int p = 0; p < kPhaseCount; ++p) {
    const uint64_t bytes = s.phase_bytes[static_cast<size_t>(p)];
    if (bytes) out.push_back(fmt::format("  {:<10} {:>12}", phase_name(static_cast<Phase>(p)), mib(bytes)));
  }
  const std::vector<std::string> layers = layer_lines(s.layer_bytes);
  if (!layers.empty()) {
    out.push_back("  by layer");
    for (const std::string& l : layers) out.push_back(l);
  }
  out.push_back("");
  if (s.open_ranges.empty()) {
    out.push_back(final ? "open ranges: none" : "open ranges: none now");
  } else {
    for (const LiveSnapshot::OpenRange& r : s.open_ranges)
      out.push_back(
          fmt::format("thread {}{}: {}", r.thread, r.thread_name.empty() ? "" : " (" + r.thread_name + ")", r.range));
  }
  out.push_back("");
  out.push_back(fmt::format("waves ({} so far; peak is absolute, measured = peak - baseline{})", s.waves.size(),
                            pricer.calibration ? "; price: raw, as the payload says" : ""));
  out.push_back(wave_header(pricer));
  const size_t first = s.waves.size() > o.wave_rows ? s.waves.size() - o.wave_rows : 0;
  for (size_t i = first; i < s.waves.size(); ++i) out.push_back(wave_text(s.waves[i], pricer).line);
  if (!pricer.admitted.empty()) out.push_back(pricer.admitted);
  for (const std::string& l : growth_lines(s)) out.push_back(l);
  return out;
}

std::vector<std::string> run_lines(const std::string& where, std::vector<Member*> members, const TopOptions& o,
                                   const Pricer& pricer, bool final) {
  std::sort(members.begin(), members.end(),
            [](const Member* a, const Member* b) { return a->snapshot.peak_bytes > b->snapshot.peak_bytes; });
  std::vector<std::string> out;
  out.push_back(fmt::format("peakscope top  {}  {} traces, the busiest first", where, members.size()));
  out.push_back(fmt::format("  {:>4} {:<16} {:>8} {:>12} {:>12} {:>6}  {:<36}  {}", "rank", "host", "pid", "live now",
                            "peak", "waves", "state", "trace"));
  for (const Member* m : members) {
    const TraceMeta& meta = m->view.meta();
    const size_t host_length = strnlen(meta.header.hostname, sizeof meta.header.hostname);
    out.push_back(fmt::format("  {:>4} {:<16} {:>8} {:>12} {:>12} {:>6}  {:<36}  {}", rank_text(m->rank()),
                              std::string(meta.header.hostname, host_length).substr(0, 16), meta.header.pid,
                              mib(m->snapshot.live_bytes), mib(m->snapshot.peak_bytes), m->snapshot.waves.size(),
                              follow_state_name(m->status.state), m->path));
  }
  out.push_back("");
  const Member* busiest = members.front();
  for (const std::string& l :
       screen_lines(busiest->path, busiest->status, busiest->view, busiest->snapshot, o, pricer, 0, final))
    out.push_back(l);
  return out;
}

}  // namespace psc::cli

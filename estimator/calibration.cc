#include "estimator/calibration.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

namespace psc {
namespace {

using Json = CalibrationJson;

struct Samples {
  std::vector<int64_t> tokens;
  std::vector<uint64_t> bytes;
  void add(int64_t t, uint64_t b) {
    tokens.push_back(t);
    bytes.push_back(b);
  }
};

// Tokens one group of the wave carries: the pricing model prices boundaries
// per group, and groups of one forward split its tokens.
int64_t group_tokens(const WaveLiveness& w) { return w.tokens / std::max<int64_t>(1, w.groups); }

Json term_to_json(const LinearTerm& t) {
  Json j;
  j["intercept_bytes"] = t.intercept;
  j["bytes_per_token"] = t.per_token;
  j["margin_bytes"] = t.margin_bytes;
  j["points"] = t.points;
  j["max_abs_residual_bytes"] = t.max_abs_residual;
  return j;
}

const Json& field(const Json& j, const char* name, const std::string& where) {
  if (!j.is_object() || !j.contains(name)) throw CalibrationError(where + "." + name + ": missing");
  return j.at(name);
}

double number(const Json& j, const char* name, const std::string& where) {
  const Json& v = field(j, name, where);
  if (!v.is_number()) throw CalibrationError(where + "." + name + ": must be a number");
  return v.get<double>();
}

uint64_t count(const Json& j, const char* name, const std::string& where) {
  const Json& v = field(j, name, where);
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    throw CalibrationError(where + "." + name + ": must be a non-negative integer");
  return v.get<uint64_t>();
}

LinearTerm term_from_json(const Json& j, const std::string& where) {
  LinearTerm t;
  t.intercept = number(j, "intercept_bytes", where);
  t.per_token = number(j, "bytes_per_token", where);
  t.margin_bytes = count(j, "margin_bytes", where);
  t.points = count(j, "points", where);
  t.max_abs_residual = number(j, "max_abs_residual_bytes", where);
  return t;
}

std::vector<uint64_t> bytes_array(const Json& j, const std::string& where, size_t expected) {
  if (!j.is_array() || j.size() != expected)
    throw CalibrationError(where + ": must be an array of " + std::to_string(expected) + " byte counts");
  std::vector<uint64_t> out;
  for (const Json& v : j) {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      throw CalibrationError(where + ": must hold non-negative integers");
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

}  // namespace

uint64_t LinearTerm::bytes_at(int64_t tokens) const {
  const double v = std::ceil(line(tokens));
  return (v > 0 ? static_cast<uint64_t>(v) : 0) + margin_bytes;
}

// The upper envelope: among lines on or above every point, the one with the
// least total excess. In one dimension it lies along an edge of the points'
// upper convex hull, so trying the line through every pair of distinct token
// counts (and the flat line at the largest value) finds it. A least-squares
// line lifted by its largest residual would also cover every point, but its
// slope is pulled by small waves and can fall below a quantity that is
// slightly convex in tokens between calibration points.
LinearTerm fit_linear(const std::vector<int64_t>& tokens, const std::vector<uint64_t>& bytes) {
  LinearTerm t;
  t.points = tokens.size();
  if (tokens.empty()) return t;
  std::map<int64_t, double> top;  // largest value per token count
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto [it, fresh] = top.emplace(tokens[i], static_cast<double>(bytes[i]));
    if (!fresh) it->second = std::max(it->second, static_cast<double>(bytes[i]));
  }
  auto covers = [&](double intercept, double slope) {
    for (const auto& [x, y] : top)
      if (intercept + slope * static_cast<double>(x) < y - 1e-6 * std::max(1.0, y)) return false;
    return true;
  };
  auto excess = [&](double intercept, double slope) {
    double sum = 0;
    for (size_t i = 0; i < tokens.size(); ++i)
      sum += intercept + slope * static_cast<double>(tokens[i]) - static_cast<double>(bytes[i]);
    return sum;
  };
  double best_intercept = 0, best_slope = 0;
  for (const auto& [x, y] : top) best_intercept = std::max(best_intercept, y);
  double best = excess(best_intercept, 0);
  for (auto a = top.begin(); a != top.end(); ++a) {
    for (auto b = std::next(a); b != top.end(); ++b) {
      const double slope = (b->second - a->second) / static_cast<double>(b->first - a->first);
      const double intercept = a->second - slope * static_cast<double>(a->first);
      if (!covers(intercept, slope)) continue;
      const double e = excess(intercept, slope);
      if (e < best) {
        best = e;
        best_intercept = intercept;
        best_slope = slope;
      }
    }
  }
  t.intercept = best_intercept;
  t.per_token = best_slope;
  double above = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const double r = static_cast<double>(bytes[i]) - t.line(tokens[i]);
    above = std::max(above, r);
    t.max_abs_residual = std::max(t.max_abs_residual, std::abs(r));
  }
  // Only rounding can leave a point above the line; cover it.
  t.margin_bytes = static_cast<uint64_t>(std::ceil(above));
  return t;
}

std::vector<uint64_t> Calibration::slot_gradients(const std::string& slot) const {
  auto it = adapter_gradient_bytes.find(slot);
  if (it != adapter_gradient_bytes.end()) return it->second;
  std::vector<uint64_t> largest(static_cast<size_t>(layers), 0);
  for (const auto& [name, bytes] : adapter_gradient_bytes)
    for (size_t i = 0; i < bytes.size() && i < largest.size(); ++i) largest[i] = std::max(largest[i], bytes[i]);
  return largest;
}

// The envelope needs two token counts to find a slope. From one, a flat line
// would fall below larger waves (what is left of the workspace grows with
// tokens like the workspace does), so the workspace line is scaled by the
// largest measured ratio instead: it keeps the workspace's growth, and the
// priced value is capped at the workspace itself.
static void fit_workspace_after_gradient(const Samples& after, Calibration* c) {
  if (after.tokens.empty()) return;
  const bool one_count =
      std::all_of(after.tokens.begin(), after.tokens.end(), [&](int64_t t) { return t == after.tokens.front(); });
  if (!one_count) {
    c->workspace_after_gradient = fit_linear(after.tokens, after.bytes);
    c->workspace_after_gradient_method = "envelope";
    return;
  }
  double ratio = 0;
  for (size_t i = 0; i < after.tokens.size(); ++i) {
    const double line = c->workspace.line(after.tokens[i]);
    ratio = std::max(ratio, line > 0 ? static_cast<double>(after.bytes[i]) / line : 1.0);
  }
  ratio = std::min(ratio, 1.0);
  LinearTerm scaled;
  scaled.intercept = c->workspace.intercept * ratio;
  scaled.per_token = c->workspace.per_token * ratio;
  scaled.points = after.tokens.size();
  // Never below a measured point (the ratio is capped at 1, and a line at or
  // below 0 gives none): raise the line by the largest shortfall.
  double shortfall = 0;
  for (size_t i = 0; i < after.tokens.size(); ++i)
    shortfall = std::max(shortfall, static_cast<double>(after.bytes[i]) - scaled.line(after.tokens[i]));
  scaled.intercept += shortfall;
  for (size_t i = 0; i < after.tokens.size(); ++i)
    scaled.max_abs_residual =
        std::max(scaled.max_abs_residual, std::abs(static_cast<double>(after.bytes[i]) - scaled.line(after.tokens[i])));
  c->workspace_after_gradient = scaled;
  c->workspace_after_gradient_method = "scaled workspace";
}

Calibration calibrate(const std::vector<Liveness>& traces, double safety_factor) {
  Calibration c;
  c.safety_factor = safety_factor;
  for (const Liveness& t : traces) c.layers = std::max(c.layers, t.layers);
  const size_t layers = static_cast<size_t>(c.layers);

  std::vector<Samples> boundary(layers);
  Samples workspace, workspace_after, input_gradient, output, head_saved;
  for (const Liveness& t : traces) {
    c.traces.push_back(t.path);
    for (const WaveLiveness& w : t.waves) {
      if (w.tokens <= 0 || !w.children.empty()) continue;  // split waves mix their children's terms
      ++c.waves;
      const int64_t per_group = group_tokens(w);
      const uint64_t groups = static_cast<uint64_t>(std::max<int64_t>(1, w.groups));
      for (size_t i = 0; i < layers; ++i)
        boundary[i].add(per_group, i < w.boundary_bytes.size() ? w.boundary_bytes[i] / groups : 0);
      // Groups run their backward one at a time: the recomputed layer's
      // workspace and the gradient flowing between layers are one group's.
      workspace.add(per_group, w.workspace_bytes);
      if (w.workspace_after_gradient_bytes >= 0)
        workspace_after.add(per_group, static_cast<uint64_t>(w.workspace_after_gradient_bytes));
      input_gradient.add(per_group, w.input_gradient_bytes);
      // A wave of several groups shows the other groups' head state in its
      // output; one group's own output is fitted from waves of one group.
      if (w.groups <= 1) output.add(per_group, w.output_bytes);
      head_saved.add(per_group, w.head_saved_bytes);
      // Exact: what this slot's backward made, per layer. Waves of several
      // slots cannot say which slot made which gradient; they are left out.
      if (w.slots.size() == 1) {
        std::vector<uint64_t>& slot = c.adapter_gradient_bytes[w.slots[0]];
        slot.resize(layers, 0);
        for (size_t i = 0; i < layers && i < w.pending_gradient_bytes.size(); ++i)
          slot[i] = std::max(slot[i], w.pending_gradient_bytes[i]);
      }
      if (w.cold && w.warm_twin >= 0) {
        const WaveLiveness& warm = t.waves[static_cast<size_t>(w.warm_twin)];
        ++c.first_execution_pairs;
        // The measured peaks already hold what the hooks and CUPTI saw. What
        // no allocation record accounts for shows only in the device samples:
        // its cold − warm growth belongs to the allowance too.
        uint64_t unexplained = 0;
        for (const ColdWarmDelta& d : t.analysis.device.cold_warm) {
          if (d.cold_wave != w.index || !d.has_samples) continue;
          ++c.first_execution_device_pairs;
          unexplained = static_cast<uint64_t>(std::max<int64_t>(0, d.unexplained_growth_delta_bytes));
        }
        c.first_execution_unexplained_bytes = std::max(c.first_execution_unexplained_bytes, unexplained);
        const uint64_t peak_delta =
            w.measured_peak_bytes > warm.measured_peak_bytes ? w.measured_peak_bytes - warm.measured_peak_bytes : 0;
        c.first_execution_bytes = std::max(c.first_execution_bytes, peak_delta + unexplained);
        c.first_execution_at_peak_bytes = std::max(c.first_execution_at_peak_bytes, w.first_execution_at_peak_bytes);
      }
    }
  }
  if (c.waves == 0) throw CalibrationError("no wave with a token count in the traces given");

  for (size_t i = 0; i < layers; ++i) c.boundary.push_back(fit_linear(boundary[i].tokens, boundary[i].bytes));
  c.workspace = fit_linear(workspace.tokens, workspace.bytes);
  fit_workspace_after_gradient(workspace_after, &c);
  c.input_gradient = fit_linear(input_gradient.tokens, input_gradient.bytes);
  c.output = fit_linear(output.tokens, output.bytes);
  c.head_saved = fit_linear(head_saved.tokens, head_saved.bytes);

  for (const Liveness& t : traces) {
    for (const WaveLiveness& w : t.waves) {
      if (w.tokens <= 0 || !w.children.empty()) continue;  // split waves mix their children's terms
      WaveResiduals r{t.path, w.index, w.tokens, w.cold, {}};
      uint64_t retained = 0;
      double retained_fit = 0;
      const int64_t per_group = group_tokens(w);
      for (size_t i = 0; i < layers && i < w.boundary_bytes.size(); ++i) {
        retained += w.boundary_bytes[i];
        retained_fit += c.boundary[i].line(per_group) * static_cast<double>(std::max<int64_t>(1, w.groups));
      }
      r.terms.push_back({"retained", retained, retained_fit});
      r.terms.push_back({"workspace", w.workspace_bytes, c.workspace.line(per_group)});
      if (c.workspace_after_gradient && w.workspace_after_gradient_bytes >= 0)
        r.terms.push_back({"workspace_after_gradient", static_cast<uint64_t>(w.workspace_after_gradient_bytes),
                           c.workspace_after_gradient->line(per_group)});
      r.terms.push_back({"input_gradient", w.input_gradient_bytes, c.input_gradient.line(per_group)});
      r.terms.push_back({"output", w.output_bytes,
                         c.output.line(per_group) +
                             static_cast<double>(std::max<int64_t>(0, w.groups - 1)) * c.head_saved.line(per_group)});
      c.residuals.push_back(std::move(r));
    }
  }
  return c;
}

CalibrationJson calibration_to_json(const Calibration& c) {
  Json j;
  j["format"] = "peakscope-calibration";
  j["version"] = 1;
  j["layers"] = c.layers;
  j["safety_factor"] = c.safety_factor;
  j["traces"] = c.traces;
  j["waves"] = c.waves;
  Json boundary = Json::array();
  for (const LinearTerm& t : c.boundary) boundary.push_back(term_to_json(t));
  j["boundary_per_group"] = boundary;
  j["workspace"] = term_to_json(c.workspace);
  if (c.workspace_after_gradient) {
    j["workspace_after_gradient"] = term_to_json(*c.workspace_after_gradient);
    j["workspace_after_gradient"]["method"] = c.workspace_after_gradient_method;
  }
  j["input_gradient"] = term_to_json(c.input_gradient);
  j["output"] = term_to_json(c.output);
  j["head_saved"] = term_to_json(c.head_saved);
  Json slots = Json::object();
  for (const auto& [slot, bytes] : c.adapter_gradient_bytes) slots[slot] = bytes;
  j["adapter_gradient_bytes"] = slots;
  j["first_execution"] = {{"bytes", c.first_execution_bytes},
                          {"pairs", c.first_execution_pairs},
                          {"unmatched_at_peak_bytes", c.first_execution_at_peak_bytes},
                          {"device_unexplained_bytes", c.first_execution_unexplained_bytes},
                          {"device_pairs", c.first_execution_device_pairs}};
  Json residuals = Json::array();
  for (const WaveResiduals& r : c.residuals) {
    Json row;
    row["trace"] = r.trace;
    row["wave"] = r.wave;
    row["tokens"] = r.tokens;
    row["cold"] = r.cold;
    for (const TermResidual& t : r.terms)
      row[t.term] = {{"measured_bytes", t.measured}, {"fitted_bytes", t.fitted}, {"residual_bytes", t.residual()}};
    residuals.push_back(row);
  }
  j["residuals"] = residuals;
  return j;
}

Calibration calibration_from_json(const CalibrationJson& j) {
  const std::string where = "calibration";
  if (!j.is_object() || j.value("format", "") != "peakscope-calibration")
    throw CalibrationError("not a peakscope calibration (no \"format\": \"peakscope-calibration\")");
  if (count(j, "version", where) != 1) throw CalibrationError("calibration.version: only version 1 is known");
  Calibration c;
  c.layers = static_cast<int32_t>(count(j, "layers", where));
  if (c.layers > kMaxLayer) throw CalibrationError("calibration.layers: too many layers");
  c.safety_factor = number(j, "safety_factor", where);
  if (!(c.safety_factor >= 1.0 && c.safety_factor <= 64.0))
    throw CalibrationError("calibration.safety_factor: must be between 1 and 64");
  const Json& boundary = field(j, "boundary_per_group", where);
  if (!boundary.is_array() || boundary.size() != static_cast<size_t>(c.layers))
    throw CalibrationError("calibration.boundary_per_group: must have one entry per layer");
  for (size_t i = 0; i < boundary.size(); ++i)
    c.boundary.push_back(term_from_json(boundary[i], where + ".boundary_per_group[" + std::to_string(i) + "]"));
  c.workspace = term_from_json(field(j, "workspace", where), where + ".workspace");
  // Optional: calibrations written before the overlap credit have none.
  if (j.contains("workspace_after_gradient")) {
    const Json& after = j["workspace_after_gradient"];
    c.workspace_after_gradient = term_from_json(after, where + ".workspace_after_gradient");
    c.workspace_after_gradient_method = after.is_object() ? after.value("method", "") : "";
  }
  c.input_gradient = term_from_json(field(j, "input_gradient", where), where + ".input_gradient");
  c.output = term_from_json(field(j, "output", where), where + ".output");
  c.head_saved = term_from_json(field(j, "head_saved", where), where + ".head_saved");
  const Json& slots = field(j, "adapter_gradient_bytes", where);
  if (!slots.is_object()) throw CalibrationError("calibration.adapter_gradient_bytes: must be an object");
  for (auto it = slots.begin(); it != slots.end(); ++it)
    c.adapter_gradient_bytes[it.key()] =
        bytes_array(it.value(), where + ".adapter_gradient_bytes." + it.key(), static_cast<size_t>(c.layers));
  const Json& first = field(j, "first_execution", where);
  c.first_execution_bytes = count(first, "bytes", where + ".first_execution");
  c.first_execution_pairs = count(first, "pairs", where + ".first_execution");
  c.waves = count(j, "waves", where);
  return c;
}

}  // namespace psc

// Calibrations as JSON (calibration_to_json, calibration_from_json,
// read_calibration): every field the fit writes, read back with its path in
// any error, and older versions read as they priced.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/json_file.h"
#include "estimator/calibration.h"

namespace psc {
namespace {

using Json = CalibrationJson;

Json nullable(double v) { return v < 0 ? Json(nullptr) : Json(v); }

Json line_to_json(const GrowthLine& l) {
  Json j = {{"intercept_bytes", l.intercept},
            {"bytes_per_token", l.per_token},
            {"bytes_per_square_token", l.per_square_token}};
  if (l.per_longest_square != 0) j["bytes_per_longest_square"] = l.per_longest_square;
  if (l.per_sequence != 0) j["bytes_per_sequence"] = l.per_sequence;
  return j;
}

Json term_to_json(const GrowthTerm& t) {
  Json j;
  j["growth"] = growth_name(t.growth);
  j["intercept_bytes"] = t.intercept;
  j["bytes_per_token"] = t.per_token;
  j["bytes_per_square_token"] = t.per_square_token;
  // Packed calibrations only; absent: 0.
  if (t.per_longest_square != 0) j["bytes_per_longest_square"] = t.per_longest_square;
  if (t.per_sequence != 0) j["bytes_per_sequence"] = t.per_sequence;
  j["margin_bytes"] = t.margin_bytes;
  j["points"] = t.points;
  j["sizes"] = t.sizes;
  j["max_abs_residual_bytes"] = t.max_abs_residual;
  j["range"] = {{"tokens", {t.smallest.tokens, t.largest.tokens}},
                {"square_tokens", {t.smallest.square_tokens, t.largest.square_tokens}},
                {"sequences", {t.smallest.sequences, t.largest.sequences}},
                {"longest_share", t.longest_share},
                {"least_longest_share", t.least_longest_share},
                {"longest_square", t.largest.longest_square}};
  j["beyond"] = t.has_beyond ? line_to_json(t.beyond) : Json(nullptr);
  j["left_out_error"] = {{"linear", nullable(t.left_out_error_linear)},
                         {"quadratic", nullable(t.left_out_error_quadratic)}};
  if (!t.knots.empty()) {
    Json knots = Json::array();
    for (const GrowthTerm::Knot& k : t.knots) knots.push_back({k.tokens, k.value});
    j["knots"] = knots;
  }
  if (!t.squares_floor.empty()) {
    Json floor = Json::array();
    for (const GrowthTerm::Knot& k : t.squares_floor) floor.push_back({k.tokens, k.value});
    j["squares_floor"] = floor;
  }
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

double optional_number(const Json& j, const char* name, const std::string& where, double fallback) {
  if (!j.contains(name) || j.at(name).is_null()) return fallback;
  return number(j, name, where);
}

// A list of knots, `name`: [[tokens, value], ...] in increasing tokens;
// empty when absent. `positive`: tokens above 0 and values of 0 or more too.
std::vector<GrowthTerm::Knot> knots_from_json(const Json& j, const char* name, const char* value,
                                              const std::string& where, bool positive) {
  std::vector<GrowthTerm::Knot> out;
  if (!j.contains(name)) return out;
  const Json& list = j.at(name);
  const std::string what =
      where + "." + name + ": must be an array of [tokens, " + value + "]" + (positive ? ", tokens positive" : "");
  if (!list.is_array()) throw CalibrationError(what);
  for (const Json& k : list) {
    if (!k.is_array() || k.size() != 2 || !k[0].is_number_integer() || !k[1].is_number() ||
        (positive && (k[0].get<int64_t>() <= 0 || !(k[1].get<double>() >= 0))))
      throw CalibrationError(what);
    const GrowthTerm::Knot knot{k[0].get<int64_t>(), k[1].get<double>()};
    if (!out.empty() && knot.tokens <= out.back().tokens)
      throw CalibrationError(where + "." + name + ": tokens must increase");
    out.push_back(knot);
  }
  return out;
}

// Version 1 terms are lines in tokens with no range: read as linear, with no
// sizes recorded (no warning, no conservative growth), as they priced.
GrowthTerm term_from_json(const Json& j, const std::string& where) {
  GrowthTerm t;
  t.intercept = number(j, "intercept_bytes", where);
  t.per_token = number(j, "bytes_per_token", where);
  t.margin_bytes = count(j, "margin_bytes", where);
  t.points = count(j, "points", where);
  t.max_abs_residual = number(j, "max_abs_residual_bytes", where);
  t.growth = t.points == 0 ? Growth::kNone : Growth::kLinear;
  if (!j.contains("growth")) return t;
  const Json& growth = j.at("growth");
  try {
    t.growth = growth_from_name(growth.is_string() ? growth.get<std::string>() : "");
  } catch (const std::invalid_argument& e) {
    throw CalibrationError(where + ".growth: " + e.what());
  }
  t.per_square_token = number(j, "bytes_per_square_token", where);
  t.per_longest_square = optional_number(j, "bytes_per_longest_square", where, 0);
  t.per_sequence = optional_number(j, "bytes_per_sequence", where, 0);
  t.sizes = count(j, "sizes", where);
  const Json& range = field(j, "range", where);
  const Json& tokens = field(range, "tokens", where + ".range");
  const Json& squares = field(range, "square_tokens", where + ".range");
  if (!tokens.is_array() || tokens.size() != 2 || !tokens[0].is_number_integer() || !tokens[1].is_number_integer() ||
      !squares.is_array() || squares.size() != 2 || !squares[0].is_number() || !squares[1].is_number())
    throw CalibrationError(where +
                           ".range: must give tokens [smallest, largest] and square_tokens [smallest, largest]");
  t.smallest = {tokens[0].get<int64_t>(), squares[0].get<double>(), squares[0].get<double>(), 1};
  t.largest = {tokens[1].get<int64_t>(), squares[1].get<double>(), squares[1].get<double>(), 1};
  // The packing of the calibration waves; absent: waves of one sequence.
  t.longest_share = t.least_longest_share = 1;
  if (range.contains("sequences")) {
    const Json& sequences = range["sequences"];
    if (!sequences.is_array() || sequences.size() != 2 || !sequences[0].is_number() || !sequences[1].is_number() ||
        !(sequences[0].get<double>() > 0))
      throw CalibrationError(where + ".range.sequences: must be [fewest, most], both positive");
    t.smallest.sequences = sequences[0].get<double>();
    t.largest.sequences = sequences[1].get<double>();
    t.longest_share = optional_number(range, "longest_share", where + ".range", 1);
    t.least_longest_share = optional_number(range, "least_longest_share", where + ".range", 1);
    t.largest.longest_square = optional_number(range, "longest_square", where + ".range", t.largest.square_tokens);
  }
  if (!(t.longest_share >= 0 && t.longest_share <= 1) || !(t.least_longest_share > 0 && t.least_longest_share <= 1))
    throw CalibrationError(where + ".range: longest_share and least_longest_share must be in (0, 1]");
  const Json& beyond = field(j, "beyond", where);
  if (!beyond.is_null()) {
    t.has_beyond = true;
    t.beyond = {number(beyond, "intercept_bytes", where + ".beyond"),
                number(beyond, "bytes_per_token", where + ".beyond"),
                number(beyond, "bytes_per_square_token", where + ".beyond"),
                optional_number(beyond, "bytes_per_longest_square", where + ".beyond", 0),
                optional_number(beyond, "bytes_per_sequence", where + ".beyond", 0)};
  }
  if (j.contains("left_out_error") && j.at("left_out_error").is_object()) {
    t.left_out_error_linear = optional_number(j.at("left_out_error"), "linear", where + ".left_out_error", -1);
    t.left_out_error_quadratic = optional_number(j.at("left_out_error"), "quadratic", where + ".left_out_error", -1);
  }
  // Absent in calibrations written before the chords bounded prices, and
  // before packed waves of shorter sequences were priced at the calibrated
  // squares.
  t.knots = knots_from_json(j, "knots", "bytes", where, false);
  t.squares_floor = knots_from_json(j, "squares_floor", "squares", where, true);
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

Json moment_to_json(const MomentFit& m) {
  Json events = Json::array();
  for (const GrowthTerm& t : m.events) events.push_back(term_to_json(t));
  Json j = {{"method", m.method}, {"includes_gradient", m.includes_gradient}, {"events", events}};
  if (!m.freed_temporaries.empty()) j["freed_temporaries"] = m.freed_temporaries;
  return j;
}

MomentFit moment_from_json(const Json& j, const std::string& where) {
  MomentFit m;
  const Json& method = field(j, "method", where);
  if (!method.is_string()) throw CalibrationError(where + ".method: must be a string");
  m.method = method.get<std::string>();
  m.includes_gradient = j.value("includes_gradient", false);
  const Json& events = field(j, "events", where);
  if (!events.is_array() || events.empty()) throw CalibrationError(where + ".events: must be a non-empty array");
  for (size_t k = 0; k < events.size(); ++k)
    m.events.push_back(term_from_json(events[k], where + ".events[" + std::to_string(k) + "]"));
  if (j.contains("freed_temporaries") && !j["freed_temporaries"].is_null())
    m.freed_temporaries = bytes_array(j["freed_temporaries"], where + ".freed_temporaries", m.events.size());
  return m;
}

MomentFits moments_from_json(const Json& m, size_t layers, const std::string& at) {
  MomentFits fits;
  fits.head = moment_from_json(field(m, "head", at), at + ".head");
  for (const char* kind : {"before_gradient", "after_gradient"}) {
    const Json& list = field(m, kind, at);
    const std::string here = at + "." + kind;
    if (!list.is_array() || list.size() != layers)
      throw CalibrationError(here + ": must have one entry per layer (" + std::to_string(layers) + ")");
    std::vector<MomentFit>& into = std::string(kind) == "before_gradient" ? fits.before_gradient : fits.after_gradient;
    for (size_t i = 0; i < layers; ++i) into.push_back(moment_from_json(list[i], here + "[" + std::to_string(i) + "]"));
  }
  return fits;
}

void margin_from_json(const Json& m, const std::string& at, Margin* margin) {
  if (!m.is_object() || !m.contains("derived") || !m["derived"].is_boolean())
    throw CalibrationError(at + ": must be an object with \"derived\": true or false");
  margin->derived = m["derived"].get<bool>();
  if (margin->derived) {
    margin->inside = number(m, "inside", at);
    margin->per_doubling = number(m, "per_doubling", at);
    margin->largest_tokens = static_cast<int64_t>(count(m, "largest_tokens", at));
    if (!(margin->inside >= 0 && margin->inside <= 63) || !(margin->per_doubling >= 0 && margin->per_doubling <= 63))
      throw CalibrationError(at + ": inside and per_doubling must be fractions from 0 to 63");
  }
  if (m.contains("evidence") && m["evidence"].is_array())
    for (const Json& line : m["evidence"])
      if (line.is_string()) margin->evidence.push_back(line.get<std::string>());
}

}  // namespace

CalibrationJson calibration_to_json(const Calibration& c) {
  Json j;
  j["format"] = "peakscope-calibration";
  j["version"] = kCalibrationVersion;
  j["layers"] = c.layers;
  j["safety_factor"] = c.safety_factor;
  if (c.margin.derived) {
    j["margin"] = {{"derived", true},
                   {"inside", c.margin.inside},
                   {"per_doubling", c.margin.per_doubling},
                   {"largest_tokens", c.margin.largest_tokens},
                   {"evidence", c.margin.evidence}};
  } else if (!c.margin.evidence.empty()) {
    j["margin"] = {{"derived", false}, {"evidence", c.margin.evidence}};
  }
  j["traces"] = c.traces;
  if (!c.warnings.empty()) j["warnings"] = c.warnings;
  j["waves"] = c.waves;
  Json boundary = Json::array();
  for (const GrowthTerm& t : c.boundary) boundary.push_back(term_to_json(t));
  j["boundary_per_group"] = boundary;
  j["workspace"] = term_to_json(c.workspace);
  if (c.workspace_after_gradient) {
    j["workspace_after_gradient"] = term_to_json(*c.workspace_after_gradient);
    j["workspace_after_gradient"]["method"] = c.workspace_after_gradient_method;
  }
  j["input_gradient"] = term_to_json(c.input_gradient);
  j["output"] = term_to_json(c.output);
  j["head_saved"] = term_to_json(c.head_saved);
  if (c.waiting) j["waiting"] = term_to_json(*c.waiting);
  if (c.forward_moment) j["forward_moment"] = term_to_json(*c.forward_moment);
  if (c.runs_free_boundaries) j["runs_free_boundaries"] = true;
  if (c.moments) {
    Json before = Json::array(), after = Json::array();
    for (const MomentFit& m : c.moments->before_gradient) before.push_back(moment_to_json(m));
    for (const MomentFit& m : c.moments->after_gradient) after.push_back(moment_to_json(m));
    j["moments"] = {{"head", moment_to_json(c.moments->head)}, {"before_gradient", before}, {"after_gradient", after}};
  }
  Json slots = Json::object();
  for (const auto& [slot, bytes] : c.adapter_gradient_bytes) slots[slot] = bytes;
  j["adapter_gradient_bytes"] = slots;
  j["sequence_allowance_bytes"] = c.sequence_allowance_bytes;
  // "bytes" is the safe allowance a reader that knows of no first wave
  // charges every cold wave: a process's first wave's.
  j["first_execution"] = {{"bytes", std::max(c.first_execution_first_wave_bytes, c.first_execution_bytes)},
                          {"after_first_wave_bytes", c.first_execution_bytes},
                          {"first_wave_pairs", c.first_execution_first_wave_pairs},
                          {"per_new_shape_bytes", c.first_execution_per_shape_bytes},
                          {"once_bytes", c.first_execution_once_bytes},
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
    row["square_tokens"] = r.square_tokens;
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
  const uint64_t version = count(j, "version", where);
  if (version < kOldestCalibrationVersion || version > kCalibrationVersion)
    throw CalibrationError("calibration.version: " + std::to_string(version) +
                           " is not known (this build reads versions " + std::to_string(kOldestCalibrationVersion) +
                           (kCalibrationVersion == kOldestCalibrationVersion + 1 ? " and " : " to ") +
                           std::to_string(kCalibrationVersion) + ")");
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
  if (j.contains("waiting")) c.waiting = term_from_json(j["waiting"], where + ".waiting");
  if (j.contains("forward_moment")) c.forward_moment = term_from_json(j["forward_moment"], where + ".forward_moment");
  if (j.contains("runs_free_boundaries")) {
    const Json& frees = j["runs_free_boundaries"];
    if (!frees.is_boolean()) throw CalibrationError(where + ".runs_free_boundaries: must be true or false");
    c.runs_free_boundaries = frees.get<bool>();
  }
  if (version >= 2 && j.contains("moments") && !j["moments"].is_null())
    c.moments = moments_from_json(j["moments"], static_cast<size_t>(c.layers), where + ".moments");
  const Json& slots = field(j, "adapter_gradient_bytes", where);
  if (!slots.is_object()) throw CalibrationError("calibration.adapter_gradient_bytes: must be an object");
  for (auto it = slots.begin(); it != slots.end(); ++it)
    c.adapter_gradient_bytes[it.key()] =
        bytes_array(it.value(), where + ".adapter_gradient_bytes." + it.key(), static_cast<size_t>(c.layers));
  // Absent in calibrations written before it: no allowance, as they priced.
  if (j.contains("sequence_allowance_bytes")) c.sequence_allowance_bytes = count(j, "sequence_allowance_bytes", where);
  const Json& first = field(j, "first_execution", where);
  c.first_execution_bytes = count(first, "bytes", where + ".first_execution");
  c.first_execution_pairs = count(first, "pairs", where + ".first_execution");
  // Absent in calibrations written before it: every new shape was charged
  // the whole allowance, as they priced.
  auto given = [&](const char* key) { return first.contains(key) && !first[key].is_null(); };
  c.first_execution_per_shape_bytes = given("per_new_shape_bytes")
                                          ? count(first, "per_new_shape_bytes", where + ".first_execution")
                                          : c.first_execution_bytes;
  if (given("once_bytes")) c.first_execution_once_bytes = count(first, "once_bytes", where + ".first_execution");
  // Absent before a process's first wave was told apart: every cold wave paid bytes.
  c.first_execution_first_wave_bytes = c.first_execution_bytes;
  if (given("after_first_wave_bytes"))
    c.first_execution_bytes =
        std::min(c.first_execution_bytes, count(first, "after_first_wave_bytes", where + ".first_execution"));
  if (given("first_wave_pairs"))
    c.first_execution_first_wave_pairs = count(first, "first_wave_pairs", where + ".first_execution");
  c.waves = count(j, "waves", where);
  // Absent in calibrations written before the margin was derived: the flat
  // safety factor prices them, as it did.
  if (j.contains("margin")) margin_from_json(j["margin"], where + ".margin", &c.margin);
  if (j.contains("warnings")) {
    const Json& w = j["warnings"];
    if (!w.is_array()) throw CalibrationError("calibration.warnings: must be an array of strings");
    for (const Json& line : w) {
      if (!line.is_string()) throw CalibrationError("calibration.warnings: must be an array of strings");
      c.warnings.push_back(line.get<std::string>());
    }
  }
  index_repeats(c);
  return c;
}

Calibration read_calibration(const std::string& path) {
  Json j;
  try {
    j = read_json_file(path);
  } catch (const JsonFileError& e) {
    throw CalibrationError(e.what());
  }
  try {
    return calibration_from_json(j);
  } catch (const CalibrationError& e) {
    throw CalibrationError(path + ": " + e.what());
  } catch (const Json::exception& e) {
    // A field of the wrong type deep in the file: name the file, and say it
    // is not one calibrate wrote.
    throw CalibrationError(path + ": not a calibration calibrate wrote (" + e.what() + ")");
  }
}

}  // namespace psc

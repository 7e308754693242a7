// `peakscope price` and `peakscope replay`: the pricing model of DESIGN.md from
// the command line. All figures come from estimator/price_json.h's evaluate_plan,
// the same entry point replay uses, so a report replays through the code that
// wrote it.
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "estimator/plan.h"
#include "estimator/price_json.h"
#include "estimator/pricing_fingerprint.h"
#include "estimator/report_replay.h"
#include "tools/commands.h"

namespace psc::cli {
namespace {

using pricing::Json;

Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return Json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

void write_json_file(const std::string& path, const Json& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json.dump(2) << '\n';
  out.flush();
  if (!out) throw UsageError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
}

pricing::Bytes parse_budget(const char* text) {
  pricing::Bytes value = -1;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < 0 || *text == '\0') {
    throw UsageError(fmt::format("--budget: '{}' must be a non-negative integer number of bytes", text));
  }
  return value;
}

std::string mib(std::int64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / (1 << 20)); }

// The readable table, rendered from the same JSON that --json prints.
void print_price_table(const Json& price, const std::string& indent) {
  const Json& c = price["components"];
  auto row = [&](const char* name, const Json& bytes, const std::string& note) {
    fmt::print("{}{:<18}{:>16}{:>12}{}\n", indent, name, bytes.get<std::int64_t>(), mib(bytes.get<std::int64_t>()),
               note.empty() ? "" : "  " + note);
  };
  fmt::print("{}{:<18}{:>16}{:>12}\n", indent, "component", "bytes", "MiB");
  row("output", c["output"], "");
  row("retained", c["retained"], "");
  row("workspace", c["workspace"], "");
  row("input_gradient", c["input_gradient"], "");
  std::string slots;
  for (const Json& s : c["adapter_gradient_slots"]) slots += (slots.empty() ? "" : ", ") + s.get<std::string>();
  row("adapter_gradient", c["adapter_gradient"], slots.empty() ? "no pending gradients" : "slots: " + slots);
  row("transient", c["transient"], "");
  row("raw", price["raw_bytes"], "compare with a measured peak");
  row("required", price["required_bytes"], "raw x safety factor");
  const Json& group = price["peak_group"];
  const Json& layer = price["peak_layer"];
  fmt::print("{}peak: group {}, layer {}\n", indent, group.is_null() ? "(none)" : group.get<std::string>(),
             layer.is_null() ? "(none)" : std::to_string(layer.get<int>()));
}

void print_admission(const std::string& path, const Json& admission) {
  const std::int64_t tokens = admission["admitted_tokens"].get<std::int64_t>();
  fmt::print("{}: budget {} bytes ({} MiB), widths 1..{} tokens\n", path, admission["budget_bytes"].get<std::int64_t>(),
             mib(admission["budget_bytes"].get<std::int64_t>()), admission["max_tokens"].get<std::int64_t>());
  const bool cheap = admission["decided_by"] == "cheap";
  fmt::print("admitted: {} tokens (decided by {})\n", tokens,
             cheap ? "the cheap estimate: no slot has pending gradients"
                   : fmt::format("the exact price, {} prices searched", admission["search_prices"].get<int>()));
  if (!admission["next_required_bytes"].is_null()) {
    fmt::print("{} tokens would need {} bytes\n", tokens + 1, admission["next_required_bytes"].get<std::int64_t>());
  }
  if (tokens > 0) {
    fmt::print("price at {} tokens:\n", tokens);
    print_price_table(admission["price"], "  ");
  } else {
    fmt::print("not even 1 token fits\n");
  }
}

}  // namespace

int cmd_price(int argc, char** argv) {
  std::optional<std::string> plan_path;
  std::optional<std::string> report_path;
  std::optional<pricing::Bytes> budget;
  bool json_output = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json_output = true;
    } else if (arg == "--budget" || arg == "--report") {
      if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", arg));
      if (arg == "--budget")
        budget = parse_budget(argv[++i]);
      else
        report_path = argv[++i];
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else if (plan_path) {
      throw UsageError(fmt::format("one plan at a time ('{}' and '{}')", *plan_path, arg));
    } else {
      plan_path = arg;
    }
  }
  if (!plan_path)
    throw UsageError("missing PLAN.json (usage: price PLAN.json [--json] [--budget BYTES] [--report FILE])");

  const Json plan = read_json_file(*plan_path);
  Json result;
  try {
    result = pricing::evaluate_plan(plan, budget);
  } catch (const pricing::PlanError& e) {
    throw UsageError(fmt::format("{}: {}", *plan_path, e.what()));
  }
  if (report_path) write_json_file(*report_path, pricing::make_report(plan, budget, result));

  if (json_output) {
    fmt::print("{}\n", result.dump(2));
  } else if (budget) {
    print_admission(*plan_path, result);
  } else {
    fmt::print("{}: safety factor {}\n", *plan_path, plan["safety_factor"].dump());
    print_price_table(result, "");
  }
  return kExitOk;
}

int cmd_replay(int argc, char** argv) {
  std::vector<std::string> paths;
  bool allow_drift = false;
  bool json_output = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--allow-source-drift") {
      allow_drift = true;
    } else if (arg == "--json") {
      json_output = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) throw UsageError("missing REPORT.json (usage: replay REPORT.json... [--allow-source-drift])");

  bool all_ok = true;
  Json rows = Json::array();
  for (const std::string& path : paths) {
    const Json report = read_json_file(path);
    pricing::Replay replay;
    try {
      replay = pricing::replay_report(report, allow_drift);
    } catch (const pricing::PlanError& e) {
      throw UsageError(fmt::format("{}: {}", path, e.what()));
    }
    all_ok = all_ok && replay.ok();

    Json row = Json::object();
    row["report"] = path;
    row["ok"] = replay.ok();
    row["estimator_fingerprint"] = replay.report_fingerprint;
    row["source_drift"] = replay.source_drift;
    row["refused"] = replay.refused;
    Json mismatches = Json::array();
    for (const pricing::Mismatch& m : replay.mismatches) {
      mismatches.push_back({{"component", m.component}, {"reported", m.reported}, {"repriced", m.repriced}});
    }
    row["mismatches"] = std::move(mismatches);
    rows.push_back(std::move(row));
    if (json_output) continue;

    if (replay.refused) {
      fmt::print(stderr,
                 "{}: refused: estimator_fingerprint: the report was priced by {}, this build is {}; "
                 "pass --allow-source-drift to re-price it anyway\n",
                 path, replay.report_fingerprint, pricing::kEstimatorFingerprint);
      continue;
    }
    for (const pricing::Mismatch& m : replay.mismatches) {
      fmt::print(stderr, "{}: mismatch: {}: report says {}, re-priced {}\n", path, m.component, m.reported, m.repriced);
    }
    if (replay.ok()) {
      fmt::print("{}: ok{}\n", path,
                 replay.source_drift ? fmt::format(" (source drift allowed: report {}, this build {})",
                                                   replay.report_fingerprint, pricing::kEstimatorFingerprint)
                                     : "");
    }
  }
  if (json_output) fmt::print("{}\n", Json{{"reports", rows}, {"ok", all_ok}}.dump(2));
  return all_ok ? kExitOk : kExitCheckFailed;
}

}  // namespace psc::cli

// `peakscope price` and `peakscope replay`: the pricing model (docs/design.md,
// "The pricing model"; docs/pricing.md) from the command line; their command
// lines are in cli/command_table.cc. All figures come from
// pricing/price_json.h's evaluate_plan, the same entry point replay uses, so a
// report replays through the code that wrote it.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "common/bytes.h"
#include "common/json_file.h"
#include "estimator/calibration.h"
#include "estimator/predict_json.h"
#include "pricing/plan.h"
#include "pricing/price_json.h"
#include "pricing/pricing_fingerprint.h"
#include "pricing/saved_price.h"

namespace psc::cli {
namespace {

using pricing::Json;

// The readable table, rendered from the same JSON that --json prints.
void print_price_table(const Json& price, const std::string& indent) {
  const Json& c = price["components"];
  auto row = [&](const char* name, const Json& bytes, const std::string& note) {
    fmt::print("{}{:<18}{:>16} {:>11}{}\n", indent, name, bytes.get<std::int64_t>(),
               format_mib(bytes.get<std::int64_t>()), note.empty() ? "" : "  " + note);
  };
  fmt::print("{}{:<18}{:>16} {:>11}\n", indent, "component", "bytes", "MiB");
  row("output", c["output"], "");
  row("retained", c["retained"], "");
  row("workspace", c["workspace"], "");
  row("input_gradient", c["input_gradient"], "");
  std::string slots;
  for (const Json& s : c["adapter_gradient_slots"]) slots += (slots.empty() ? "" : ", ") + s.get<std::string>();
  row("adapter_gradient", c["adapter_gradient"], slots.empty() ? "no pending gradients" : "slots: " + slots);
  if (c.contains("moment")) row("moment", c["moment"], "what the worst moment adds (docs/pricing.md)");
  if (c.contains("waiting")) row("waiting", c["waiting"], "head state of the groups whose backward has not run");
  row("transient", c["transient"], "");
  row("raw", price["raw_bytes"], "compare with a measured peak");
  row("required", price["required_bytes"], "raw x safety factor");
  const Json& group = price["peak_group"];
  const Json& layer = price["peak_layer"];
  std::string moment;
  if (price.contains("peak_moment"))
    moment = fmt::format(", {} (it holds {} bytes beside boundaries and gradients)",
                         price["peak_moment"].get<std::string>(), price["peak_moment_bytes"].get<std::int64_t>());
  fmt::print("{}peak: group {}, layer {}{}\n", indent, group.is_null() ? "(none)" : group.get<std::string>(),
             layer.is_null() ? "(none)" : std::to_string(layer.get<int>()), moment);
}

void print_admission(const std::string& path, const Json& admission) {
  const std::int64_t tokens = admission["admitted_tokens"].get<std::int64_t>();
  fmt::print("{}: budget {} bytes ({} MiB), widths 1..{} tokens\n", path, admission["budget_bytes"].get<std::int64_t>(),
             format_mib(admission["budget_bytes"].get<std::int64_t>()), admission["max_tokens"].get<std::int64_t>());
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

// ---- prices from a calibration (estimator/predict.h) ----------------------------

struct CalibratedOptions {
  std::string calibration;
  std::optional<std::int64_t> tokens;
  std::optional<pricing::Bytes> budget;
  std::int64_t max_sequence_length = 0;
  std::int64_t max_tokens = std::int64_t{1} << 20;
  bool max_tokens_given = false;
  WaveRequest request;
  std::vector<double> rank_shares;  // --rank-shares: empty for one process
  bool json = false;
};

// SLOT=N or SLOT=L+L+... (a group of packed sequences).
GroupRequest parse_group(const std::string& option, const std::string& item) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
    throw UsageError(fmt::format("{}: expected SLOT=TOKENS or SLOT=L+L+..., got \"{}\"", option, item));
  GroupRequest group;
  group.slot = item.substr(0, eq);
  std::string rest = item.substr(eq + 1);
  for (size_t at = 0;;) {
    const size_t plus = rest.find('+', at);
    group.sequence_lengths.push_back(parse_count(option, rest.substr(at, plus - at)));
    if (plus == std::string::npos) break;
    at = plus + 1;
  }
  for (int64_t l : group.sequence_lengths) group.tokens += l;
  if (group.sequence_lengths.size() == 1) group.sequence_lengths.clear();
  return group;
}

// The request's tokens, and with --max-sequence-length the sequences of the
// one wave --tokens prices.
void finish_request(CalibratedOptions& o) {
  if (o.tokens && o.max_tokens_given) throw UsageError("--max-tokens bounds --budget's search: give it with --budget");
  if (o.tokens && o.max_sequence_length > 0 && !o.request.groups.empty())
    throw UsageError("--groups gives each group's sequences (SLOT=L+L+...): --max-sequence-length packs with --budget");
  if (o.tokens) o.request.tokens = *o.tokens;
  // One wave packed at most --max-sequence-length long: its sequences, as
  // --budget's search packs each width (with --rank-shares, each rank's part).
  if (o.tokens && o.max_sequence_length > 0 && o.rank_shares.empty() && o.request.groups.empty()) {
    if (!o.request.sequence_lengths.empty())
      throw UsageError("--sequences gives the wave's sequences: no --max-sequence-length beside it");
    try {
      if (*o.tokens > o.max_sequence_length)
        o.request.sequence_lengths = packed_sequences(*o.tokens, o.max_sequence_length);
    } catch (const PredictError& e) {
      throw UsageError(fmt::format("--max-sequence-length: {}", e.what()));
    }
  }
}

// False for -h: the usage is printed.
[[nodiscard]] bool parse_calibrated(int argc, char** argv, CalibratedOptions& o) {
  ArgParser args(command_spec("price"));
  args.option({"--calibration"}, &o.calibration);
  args.option({"--tokens"},
              [&](const std::string& name, const std::string& value) { o.tokens = parse_count(name, value); });
  args.option({"--sequences"}, [&](const std::string& name, const std::string& value) {
    for (const std::string& length : split_list(value)) o.request.sequence_lengths.push_back(parse_count(name, length));
  });
  args.option({"--slots"}, [&](const std::string&, const std::string& value) {
    for (const std::string& slot : split_list(value)) {
      if (slot.empty()) throw UsageError("--slots: an empty slot name");
      o.request.slots.push_back(slot);
    }
  });
  args.option({"--groups"}, [&](const std::string& name, const std::string& value) {
    for (const std::string& item : split_list(value)) o.request.groups.push_back(parse_group(name, item));
  });
  args.option({"--budget"},
              [&](const std::string& name, const std::string& value) { o.budget = parse_bytes(name, value); });
  args.option({"--max-sequence-length"}, [&](const std::string& name, const std::string& value) {
    o.max_sequence_length = parse_count(name, value);
  });
  args.option({"--max-tokens"}, [&](const std::string& name, const std::string& value) {
    o.max_tokens = parse_count(name, value);
    o.max_tokens_given = true;
    if (o.max_tokens < 1 || o.max_tokens > pricing::kMaxAdmissionTokens)
      throw UsageError("--max-tokens: must be from 1 to 2^40");
  });
  args.option({"--rank-shares"}, [&](const std::string& name, const std::string& value) {
    for (const std::string& share : split_list(value)) {
      o.rank_shares.push_back(parse_number(name, share, std::numeric_limits<double>::denorm_min(),
                                           std::numeric_limits<double>::max(), "a positive number"));
    }
  });
  args.flag({"--cold"}, &o.request.cold);
  args.flag({"--after-first-wave"}, &o.request.after_first_wave);
  args.flag({"--gradients-exist"}, &o.request.gradients_exist);
  args.option({"--backward-order"}, [&](const std::string& name, const std::string& value) {
    for (const std::string& index : split_list(value)) {
      const std::int64_t group = parse_count(name, index);
      if (group > std::numeric_limits<std::int32_t>::max())
        throw UsageError(fmt::format("{}: '{}' is no group's index", name, index));
      o.request.backward_order.push_back(static_cast<std::int32_t>(group));
    }
  });
  args.flag({"--json"}, &o.json);
  if (!args.parse(argc, argv)) return false;
  if (!o.request.backward_order.empty() && o.request.groups.empty())
    throw UsageError("--backward-order orders the groups of --groups");
  if (o.calibration.empty()) args.fail("no calibration given (--calibration CAL.json)");
  if (o.request.after_first_wave && !o.request.cold)
    throw UsageError("--after-first-wave says what a cold wave pays: give --cold with it");
  if (!o.request.groups.empty()) {
    if (o.tokens) throw UsageError("--groups gives each group's tokens: no --tokens beside it");
    if (!o.request.slots.empty() || !o.request.sequence_lengths.empty())
      throw UsageError("--groups gives each group's slot and sequences: no --slots or --sequences beside it");
    if (!o.rank_shares.empty()) throw UsageError("--groups prices one process's wave: no --rank-shares beside it");
    if (o.budget) {
      for (const GroupRequest& g : o.request.groups)
        if (g.sequence_lengths.size() > 1)
          throw UsageError("--groups with --budget: each group's share is one number; pack with --max-sequence-length");
    } else {
      o.tokens = 0;  // the groups' sum
    }
  }
  if (o.tokens.has_value() == o.budget.has_value())
    args.fail("give --tokens N (a price) or --budget BYTES (the largest wave)");
  if (o.budget && !o.request.sequence_lengths.empty())
    throw UsageError("--sequences prices one wave; with --budget, give --max-sequence-length");
  if (!o.rank_shares.empty() && !o.request.sequence_lengths.empty())
    throw UsageError("--sequences gives one process's wave; with --rank-shares, give --max-sequence-length");
  finish_request(o);
  return true;
}

void print_warnings(const Json& warnings) {
  for (const Json& w : warnings) fmt::print("warning: {}\n", w.get<std::string>());
}

// What was priced: "N tokens in K sequences, slots A,B" or "N tokens in
// groups a=128, b=96+160".
std::string wave_shape(const Json& r) {
  if (r.contains("groups")) {
    std::string groups;
    for (const Json& g : r["groups"]) {
      std::string size = std::to_string(g["tokens"].get<std::int64_t>());
      if (g["sequence_lengths"].size() > 1) {
        size.clear();
        for (const Json& l : g["sequence_lengths"])
          size += (size.empty() ? "" : "+") + std::to_string(l.get<std::int64_t>());
      }
      groups += (groups.empty() ? "" : ", ") + g["slot"].get<std::string>() + "=" + size;
    }
    std::string order;
    if (r.contains("backward_order"))
      for (const Json& i : r["backward_order"])
        order += (order.empty() ? "" : ",") + r["groups"][i.get<size_t>()]["slot"].get<std::string>();
    return fmt::format("{} tokens in groups {}, backwards {}", r["tokens"].get<std::int64_t>(), groups,
                       order.empty() ? "in the worst order" : "in the order " + order);
  }
  std::string slots;
  for (const Json& s : r["slots"]) slots += (slots.empty() ? "" : ",") + s.get<std::string>();
  const size_t sequences = r["sequence_lengths"].empty() ? 1 : r["sequence_lengths"].size();
  return fmt::format("{} tokens in {} sequence{}, slots {}", r["tokens"].get<std::int64_t>(), sequences,
                     sequences == 1 ? "" : "s", slots.empty() ? "(the calibrated one)" : slots);
}

void print_prediction(const std::string& path, const Json& p) {
  const Json& r = p["request"];
  fmt::print("{}: {}, {}{}; priced at its {}\n", path, wave_shape(r), r["cold"].get<bool>() ? "cold" : "warm",
             r["gradients_exist"].get<bool>() ? ", gradients exist" : ", gradients pending",
             p["pricing"].get<std::string>());
  print_price_table(p, "");
  fmt::print("margin: {:+.2f}%: {}\n", p["margin"]["fraction"].get<double>() * 100,
             p["margin"]["why"].get<std::string>());
  print_warnings(p["warnings"]);
}

void print_ranks(const Json& ranks) {
  fmt::print("{:>6} {:>10} {:>16} {:>16}\n", "rank", "tokens", "raw_bytes", "required_bytes");
  for (const Json& r : ranks["ranks"])
    fmt::print("{} {:>4} {:>10} {:>16} {:>16}\n", r["rank"] == ranks["busiest_rank"] ? "*" : " ", r["rank"].get<int>(),
               r["tokens"].get<std::int64_t>(), r["raw_bytes"].get<std::int64_t>(),
               r["required_bytes"].get<std::int64_t>());
}

// --rank-shares: every rank's part, the busiest's price the wave's.
int price_run(const CalibratedOptions& o, const Calibration& calibration) {
  if (o.tokens) {
    const RunPrediction run = predict_ranks(calibration, o.request, o.rank_shares, o.max_sequence_length);
    const RankPrediction& busiest = run.ranks[run.busiest];
    WaveRequest part = o.request;
    part.tokens = busiest.tokens;
    Json result = prediction_to_json(calibration, part, busiest.prediction);
    const Json ranks = ranks_to_json(run);
    result["ranks"] = ranks["ranks"];
    result["busiest_rank"] = ranks["busiest_rank"];
    result["wave_tokens"] = *o.tokens;
    if (o.json) {
      fmt::print("{}\n", result.dump(2));
      return kExitOk;
    }
    fmt::print("{}: a wave of {} tokens over {} ranks; each rank's part priced, the busiest rank's is the wave's\n",
               o.calibration, *o.tokens, run.ranks.size());
    print_ranks(ranks);
    fmt::print("busiest rank {}: ", busiest.rank);
    print_prediction(o.calibration, result);
    return kExitOk;
  }
  const pricing::Admission admission =
      admit_run_wave(calibration, o.request, o.rank_shares, o.max_sequence_length, o.max_tokens, *o.budget);
  Json result = pricing::Json::object();
  result["budget_bytes"] = *o.budget;
  result["rank_shares"] = o.rank_shares;
  result["admitted_tokens"] = admission.tokens;
  result["search_prices"] = admission.search_prices;
  result["ranks"] = nullptr;
  if (admission.tokens > 0) {
    WaveRequest at = o.request;
    at.tokens = admission.tokens;
    const RunPrediction run = predict_ranks(calibration, at, o.rank_shares, o.max_sequence_length);
    const Json ranks = ranks_to_json(run);
    result["ranks"] = ranks["ranks"];
    result["busiest_rank"] = ranks["busiest_rank"];
    WaveRequest part = o.request;
    part.tokens = run.ranks[run.busiest].tokens;
    result["price"] = prediction_to_json(calibration, part, run.price());
  }
  if (o.json) {
    fmt::print("{}\n", result.dump(2));
    return kExitOk;
  }
  fmt::print("{}: budget {} bytes ({} MiB) per rank, {} ranks sharing a wave as {}\n", o.calibration, *o.budget,
             format_mib(*o.budget), o.rank_shares.size(), fmt::join(o.rank_shares, ":"));
  if (admission.tokens == 0) {
    fmt::print("not even 1 token fits\n");
    return kExitOk;
  }
  fmt::print("largest wave that fits: {} tokens over the ranks ({} prices searched)\n", admission.tokens,
             admission.search_prices);
  print_ranks(result);
  print_price_table(result["price"], "  ");
  print_warnings(result["price"]["warnings"]);
  return kExitOk;
}

int price_from_calibration(int argc, char** argv) {
  CalibratedOptions o;
  if (!parse_calibrated(argc, argv, o)) return kExitOk;
  // A CalibrationError names the file; main prints it like any bad input.
  const Calibration calibration = read_calibration(o.calibration);
  try {
    if (!o.rank_shares.empty()) return price_run(o, calibration);
    if (o.tokens) {
      const Json result = prediction_to_json(calibration, o.request, predict(calibration, o.request));
      if (o.json) {
        fmt::print("{}\n", result.dump(2));
      } else {
        print_prediction(o.calibration, result);
      }
      return kExitOk;
    }
    const pricing::Admission admission =
        admit_wave(calibration, o.request, o.max_sequence_length, o.max_tokens, *o.budget);
    const Json result =
        wave_admission_to_json(calibration, o.request, o.max_sequence_length, o.max_tokens, *o.budget, admission);
    if (o.json) {
      fmt::print("{}\n", result.dump(2));
      return kExitOk;
    }
    fmt::print("{}: budget {} bytes ({} MiB), waves of 1..{} tokens{}\n", o.calibration, *o.budget,
               format_mib(*o.budget), o.max_tokens,
               o.max_sequence_length > 0 ? fmt::format(" packed in sequences of at most {}", o.max_sequence_length)
                                         : std::string(" in one sequence"));
    if (admission.tokens == 0) {
      fmt::print("not even 1 token fits\n");
      return kExitOk;
    }
    fmt::print("largest wave that fits in {} MiB: {} tokens ({} prices searched)\n", format_mib(*o.budget),
               admission.tokens, admission.search_prices);
    if (result["price"]["request"].contains("groups")) {
      std::string split;
      for (const Json& g : result["price"]["request"]["groups"])
        split += fmt::format("{}{}={}", split.empty() ? "" : ", ", g["slot"].get<std::string>(),
                             g["tokens"].get<std::int64_t>());
      fmt::print("split between the groups: {}\n", split);
    }
    if (admission.next_required_bytes)
      fmt::print("{} tokens would need {} bytes\n", admission.tokens + 1, *admission.next_required_bytes);
    fmt::print("price at {} tokens:\n", admission.tokens);
    print_price_table(result["price"], "  ");
    print_warnings(result["price"]["warnings"]);
  } catch (const PredictError& e) {
    throw UsageError(fmt::format("{}: {}", o.calibration, e.what()));
  }
  return kExitOk;
}

}  // namespace

int cmd_price(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--calibration") return price_from_calibration(argc, argv);
  std::string plan_path;
  std::optional<std::string> report_path;
  std::optional<pricing::Bytes> budget;
  bool json_output = false;
  ArgParser args(command_spec("price"));
  args.one_line_errors();
  args.flag({"--json"}, &json_output);
  // A plan's budget is bytes, as every figure in the plan is.
  args.option({"--budget"}, [&](const std::string& name, const std::string& value) {
    budget = parse_count(name, value, "number of bytes");
  });
  args.option({"--report"}, [&](const std::string&, const std::string& value) { report_path = value; });
  args.positional(&plan_path, "plan");
  if (!args.parse(argc, argv)) return kExitOk;
  if (plan_path.empty())
    args.fail(fmt::format("missing PLAN.json (usage: peakscope {})", command_spec("price").forms[0]));

  const Json plan = read_json_file(plan_path);
  Json result;
  try {
    result = pricing::evaluate_plan(plan, budget);
  } catch (const pricing::PlanError& e) {
    throw UsageError(fmt::format("{}: {}", plan_path, e.what()));
  }
  if (report_path) write_json_file(*report_path, pricing::make_saved_price(plan, budget, result));

  if (json_output) {
    fmt::print("{}\n", result.dump(2));
  } else if (budget) {
    print_admission(plan_path, result);
  } else {
    fmt::print("{}: safety factor {}\n", plan_path, plan["safety_factor"].dump());
    print_price_table(result, "");
  }
  return kExitOk;
}

int cmd_replay(int argc, char** argv) {
  std::vector<std::string> paths;
  bool allow_drift = false;
  bool json_output = false;
  ArgParser args(command_spec("replay"));
  args.one_line_errors();
  args.flag({"--allow-source-drift"}, &allow_drift);
  args.flag({"--json"}, &json_output);
  args.positionals(&paths);
  if (!args.parse(argc, argv)) return kExitOk;
  if (paths.empty())
    args.fail(fmt::format("missing REPORT.json (usage: peakscope {})", command_spec("replay").forms[0]));

  bool all_ok = true;
  // A report that cannot be read or is not one is said, and the others are
  // still re-priced: exit 2 at the end.
  std::vector<std::string> unreadable;
  Json rows = Json::array();
  for (const std::string& path : paths) {
    pricing::Replay replay;
    try {
      replay = pricing::replay_saved_price(read_json_file(path), allow_drift);
    } catch (const std::exception& e) {  // JsonFileError, PlanError
      const std::string why = dynamic_cast<const pricing::PlanError*>(&e) ? path + ": " + e.what() : e.what();
      unreadable.push_back(why);
      rows.push_back({{"report", path}, {"ok", false}, {"error", why}});
      fmt::print(stderr, "peakscope replay: {}\n", why);
      continue;
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
  if (json_output) fmt::print("{}\n", Json{{"reports", rows}, {"ok", all_ok && unreadable.empty()}}.dump(2));
  if (!unreadable.empty()) return kExitBadInput;
  return all_ok ? kExitOk : kExitCheckFailed;
}

}  // namespace psc::cli

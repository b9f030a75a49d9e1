// Scenario files (docs/scenario-schema.md): strict parsing of the predict fields into a Scenario, and
// the list/`auto` parsing shared with the `dtsim predict` flags.
#include "scenarios/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>

#include "common/errors.hpp"
#include "scenarios/fields.hpp"

namespace dtsim::scenarios {
namespace {

// Shortest single-worker iteration an anchor may imply (batch / anchor). No training step is
// faster than a microsecond (a kernel launch alone takes ~5 us on a GPU); 1e300 samples/s would
// scale kernel times to 1e-298 s, below what the simulator's clock can add.
constexpr double MIN_ANCHORED_ITERATION_S = 1e-6;
// Longest single-worker iteration an anchor may imply: no training step takes an hour (one ImageNet
// epoch at batch 32, 40,000 steps, would take 4.6 years); 1e-9 samples/s at batch 1 is a 1e9 s step.
constexpr double MAX_ANCHORED_ITERATION_S = 3600;

}  // namespace

std::vector<int> parse_count_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    long long v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
      throw InputError(fmt::format("{}: expected a comma-separated list of positive integers, got '{}'", flag, text));
    if (v < 1 || v > (1LL << 30)) throw InputError(fmt::format("{}: expected values >= 1, got {}", flag, v));
    out.push_back(static_cast<int>(v));
    start = end + 1;
  }
  return out;
}

void set_ps_text(Scenario& scenario, const std::string& text, const std::string& flag) {
  if (text == "auto") {
    scenario.ps.clear();
    scenario.ps_auto = true;
    return;
  }
  scenario.ps = parse_count_list(text, flag);
  scenario.ps_auto = false;
}

void check_scenario(const Scenario& s) {
  if (s.model.empty()) throw InputError(fmt::format("{}: missing model (--model NAME|FILE)", s.file.empty() ? "predict" : s.file));
  if (s.platform.empty())
    throw InputError(fmt::format("{}: missing platform (--platform NAME|FILE)", s.file.empty() ? "predict" : s.file));
  if (s.workers.empty()) throw InputError("--workers: expected at least one worker count");
  for (int w : s.workers)
    if (w < 1) throw InputError(fmt::format("--workers: expected counts >= 1, got {}", w));
  if (s.batch < 1) throw InputError(fmt::format("--batch: expected >= 1 sample per worker, got {}", s.batch));
  if (s.threads < 0) throw InputError(fmt::format("--threads: expected >= 0, got {}", s.threads));
  if (s.ps.size() > 1 && s.ps.size() != s.workers.size())
    throw InputError(fmt::format("--ps: got {} server counts for {} worker counts (give one count, one per "
                                 "--workers entry, or auto)",
                                 s.ps.size(), s.workers.size()));
  for (int p : s.ps)
    if (p < 1) throw InputError(fmt::format("--ps: expected counts >= 1, got {}", p));
  if (s.anchor_samples_per_s && !(*s.anchor_samples_per_s > 0 && std::isfinite(*s.anchor_samples_per_s)))
    throw InputError(fmt::format("--anchor: expected a throughput > 0 samples/s, got {}", *s.anchor_samples_per_s));
  if (s.anchor_samples_per_s && s.batch / *s.anchor_samples_per_s < MIN_ANCHORED_ITERATION_S)
    throw InputError(fmt::format("--anchor: {:g} samples/s at batch {} means an iteration under {:g} s; expected a "
                                 "measured single-worker throughput",
                                 *s.anchor_samples_per_s, s.batch, MIN_ANCHORED_ITERATION_S));
  if (s.anchor_samples_per_s && s.batch / *s.anchor_samples_per_s > MAX_ANCHORED_ITERATION_S)
    throw InputError(fmt::format("--anchor: {:g} samples/s at batch {} means an iteration over {:g} s; expected a "
                                 "measured single-worker throughput in samples per second",
                                 *s.anchor_samples_per_s, s.batch, MAX_ANCHORED_ITERATION_S));
}

Scenario parse_scenario_node(const YAML::Node& node, const yaml::Origin& origin) {
  const char* ctx = "scenario";
  // The keys come from the field table: top-level ones, and each nested map's own.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<std::string>> nested;
  for (const auto& f : scenario_fields()) {
    const std::string top = f.top_key();
    if (std::find(keys.begin(), keys.end(), top) == keys.end()) keys.push_back(top);
    if (top != f.key) nested[top].push_back(f.leaf_key());
  }
  keys.emplace_back("sweep");
  yaml::check_keys(node, keys, origin, ctx);
  for (const auto& [top, leaves] : nested)
    if (node[top]) yaml::check_keys(node[top], leaves, origin, fmt::format("{} {}", ctx, top));
  Scenario s;
  s.file = origin.file;
  for (const auto& item : node) {
    // A value a sweep put into the node has no position of its own (line 1, column 1): name the file only.
    const YAML::Mark m = item.second.Mark();
    const bool placed = m.line > 0 || m.column > 0;
    s.field_origin[item.first.Scalar()] = placed ? origin.where(item.second) : origin.file;
  }
  s.name = std::filesystem::path(origin.file).stem().string();
  // In the table's order: a framework's defaults are read before the fusion_mb and cycle_ms that override them.
  for (const auto& f : scenario_fields()) {
    const std::string top = f.top_key();
    const bool is_nested = top != f.key;
    const YAML::Node map = is_nested ? node[top] : node;
    const YAML::Node value = map ? map[f.leaf_key()] : YAML::Node();
    if (!map || !value) {
      if (f.required) yaml::fail(node, origin, ctx, fmt::format("missing required field '{}'", f.key));
      continue;
    }
    f.parse(s, FieldInput(value, origin, is_nested ? fmt::format("{} {}", ctx, top) : ctx, f.leaf_key()));
  }
  if (s.ps.size() > 1 && s.ps.size() != s.workers.size())
    yaml::fail(node["ps"], origin, ctx,
               fmt::format("field 'ps' has {} counts for {} workers entries (give one, one per entry, or auto)",
                           s.ps.size(), s.workers.size()));
  return s;
}

Scenario load_scenario(const std::string& path) {
  const yaml::Origin origin{path};
  return parse_scenario_node(yaml::load_file(path), origin);
}

}  // namespace dtsim::scenarios

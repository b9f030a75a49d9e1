// Scenario files (docs/scenario-schema.md): strict parsing of the predict fields into a Scenario, and
// the list/`auto` parsing shared with the `dtsim predict` flags.
#include "scenarios/scenario.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>

#include "common/errors.hpp"
#include "platforms/transport.hpp"

namespace dtsim::scenarios {
namespace {

constexpr double BYTES_PER_MB = 1024.0 * 1024.0;  // --fusion-mb follows Horovod's MiB threshold
constexpr double S_PER_MS = 1e-3;
// Shortest single-worker iteration an anchor may imply (batch / anchor). No training step is
// faster than a microsecond (a kernel launch alone takes ~5 us on a GPU); 1e300 samples/s would
// scale kernel times to 1e-298 s, below what the simulator's clock can add.
constexpr double MIN_ANCHORED_ITERATION_S = 1e-6;
// Longest single-worker iteration an anchor may imply: no training step takes an hour (one ImageNet
// epoch at batch 32, 40,000 steps, would take 4.6 years); 1e-9 samples/s at batch 1 is a 1e9 s step.
constexpr double MAX_ANCHORED_ITERATION_S = 3600;
// Largest input side and class count a scenario may ask for (the model builder's own bounds).
constexpr int MAX_INPUT_SIDE = 1 << 15;
constexpr int MAX_CLASSES = 1 << 24;

std::vector<int> node_count_list(const YAML::Node& node, const char* key, const yaml::Origin& origin) {
  std::vector<int> out;
  if (node.IsScalar()) {
    return parse_count_list(node.Scalar(), fmt::format("{}: field '{}'", origin.where(node), key));
  }
  if (!node.IsSequence() || node.size() == 0)
    yaml::fail(node, origin, "scenario", fmt::format("field '{}' must be a positive integer or a list of them", key));
  for (const auto& item : node) {
    if (!item.IsScalar())
      yaml::fail(item, origin, "scenario", fmt::format("field '{}' must hold positive integers", key));
    const auto v = parse_count_list(item.Scalar(), fmt::format("{}: field '{}'", origin.where(item), key));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// A relative input path in a scenario is relative to the scenario's folder, so a scenario runs from any
// working directory. Names (zoo models, shipped platforms) have no '/' and no .yaml suffix.
std::string resolve_path(const std::string& value, const yaml::Origin& origin, bool names_allowed) {
  if (value.empty()) return value;
  const bool looks_like_path = value.find('/') != std::string::npos || value.ends_with(".yaml") ||
                               value.ends_with(".yml") || !names_allowed;
  const std::filesystem::path p(value);
  if (!looks_like_path || p.is_absolute()) return value;
  const std::filesystem::path dir = std::filesystem::path(origin.file).parent_path();
  return dir.empty() ? value : (dir / p).lexically_normal().string();
}

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
  yaml::check_keys(node,
                   {"name", "description", "model", "platform", "workers", "batch", "input_h", "input_w", "classes",
                    "workers_per_node", "threads", "strategy", "framework", "collective_library", "ps", "ps_placement",
                    "ps_balance", "ps_transport", "fusion_mb", "cycle_ms", "overlap", "interference", "data",
                    "sample_bytes", "prefetch_depth", "metadata_ops_per_sample",
                    "preprocess_ms_per_sample", "iterations", "anchor", "calibration_db", "comm_mode", "trace",
                    "variability", "precision", "allow_oversubscribe", "sweep"},
                   origin, ctx);
  Scenario s;
  s.file = origin.file;
  for (const auto& item : node) {
    // A value a sweep put into the node has no position of its own (line 1, column 1): name the file only.
    const YAML::Mark m = item.second.Mark();
    const bool placed = m.line > 0 || m.column > 0;
    s.field_origin[item.first.Scalar()] = placed ? origin.where(item.second) : origin.file;
  }
  s.name = yaml::optional<std::string>(node, "name", std::filesystem::path(origin.file).stem().string(), origin, ctx);
  s.description = yaml::optional<std::string>(node, "description", "", origin, ctx);
  s.model = resolve_path(yaml::required<std::string>(node, "model", origin, ctx), origin, true);
  s.platform = resolve_path(yaml::required<std::string>(node, "platform", origin, ctx), origin, true);
  if (node["workers"]) s.workers = node_count_list(node["workers"], "workers", origin);
  s.batch = yaml::optional<int>(node, "batch", s.batch, origin, ctx);
  if (s.batch < 1) yaml::fail(node["batch"], origin, ctx, fmt::format("field 'batch' must be >= 1, got {}", s.batch));
  auto non_negative_int = [&](const char* key) {
    const int v = yaml::optional<int>(node, key, 0, origin, ctx);
    if (v < 0) yaml::fail(node[key], origin, ctx, fmt::format("field '{}' must be >= 0, got {}", key, v));
    return v;
  };
  auto bounded_int = [&](const char* key, int max_value) {
    const int v = non_negative_int(key);
    if (v > max_value)
      yaml::fail(node[key], origin, ctx,
                 fmt::format("field '{}' must be in 0..{} (0 = the model's default), got {}", key, max_value, v));
    return v;
  };
  s.input_h = bounded_int("input_h", MAX_INPUT_SIDE);
  s.input_w = bounded_int("input_w", MAX_INPUT_SIDE);
  s.classes = bounded_int("classes", MAX_CLASSES);
  s.threads = non_negative_int("threads");
  s.point.workers_per_node = non_negative_int("workers_per_node");
  auto& p = s.point;
  // A named choice (strategy, framework, ...): an unknown name is an error at that field's line.
  auto choice = [&](const char* key, const auto& parse) {
    const auto text = yaml::required<std::string>(node, key, origin, ctx);
    try {
      return parse(text);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", origin.where(node[key]), e.what()));
    }
  };
  if (node["strategy"])
    p.strategy = choice("strategy", [](const std::string& t) { return sim::strategy_by_name(t, "strategy"); });
  // The framework's defaults first: fusion_mb and cycle_ms below override them when given.
  if (node["framework"])
    sim::apply_framework(p, choice("framework", [](const std::string& t) -> const sim::FrameworkProfile& {
                           return sim::framework_by_name(t, "framework");
                         }));
  if (node["collective_library"])
    p.collective_library = choice("collective_library", [](const std::string& t) {
      sim::check_collective_library(t, "collective_library");
      return t;
    });
  if (node["ps_placement"]) p.ps_placement = choice("ps_placement", sim::ps_placement_by_name);
  if (node["ps_balance"]) p.ps_balance = choice("ps_balance", sim::ps_balance_by_name);
  if (node["ps_transport"])
    p.ps_transport = choice("ps_transport", [](const std::string& t) {
      return platforms::transport_by_name(t, platforms::TransportScope::RPC).name;
    });
  if (node["data"]) p.data = choice("data", sim::data_mode_by_name);
  if (node["comm_mode"]) p.comm_mode = choice("comm_mode", sim::comm_mode_by_name);
  if (const auto ps = node["ps"]) {
    if (ps.IsScalar() && ps.Scalar() == "auto") {
      s.ps_auto = true;
    } else {
      s.ps = node_count_list(ps, "ps", origin);
    }
  }
  auto non_negative = [&](const char* key, double fallback) {
    const double v = yaml::optional<double>(node, key, fallback, origin, ctx);
    if (node[key]) yaml::require_non_negative(v, node[key], key, origin, ctx);
    return v;
  };
  p.fusion_bytes = non_negative("fusion_mb", p.fusion_bytes / BYTES_PER_MB) * BYTES_PER_MB;
  p.cycle_s = non_negative("cycle_ms", p.cycle_s / S_PER_MS) * S_PER_MS;
  p.overlap = yaml::optional<bool>(node, "overlap", p.overlap, origin, ctx);
  p.interference = yaml::optional<bool>(node, "interference", p.interference, origin, ctx);
  p.sample_bytes = non_negative("sample_bytes", 0);
  p.prefetch_depth = yaml::optional<int>(node, "prefetch_depth", p.prefetch_depth, origin, ctx);
  if (p.prefetch_depth < 1)
    yaml::fail(node["prefetch_depth"], origin, ctx, fmt::format("field 'prefetch_depth' must be >= 1, got {}", p.prefetch_depth));
  p.metadata_ops_per_sample = non_negative("metadata_ops_per_sample", p.metadata_ops_per_sample);
  p.preprocess_s_per_sample = non_negative("preprocess_ms_per_sample", 0) * S_PER_MS;
  p.iterations = yaml::optional<int>(node, "iterations", p.iterations, origin, ctx);
  if (node["iterations"] && p.iterations < 1)
    yaml::fail(node["iterations"], origin, ctx, fmt::format("field 'iterations' must be >= 1, got {}", p.iterations));
  if (node["anchor"]) {
    const double a = yaml::required<double>(node, "anchor", origin, ctx);
    yaml::require_positive(a, node["anchor"], "anchor", origin, ctx);
    s.anchor_samples_per_s = a;
  }
  s.db_path = resolve_path(yaml::optional<std::string>(node, "calibration_db", "", origin, ctx), origin, false);
  if (node["precision"]) {
    s.precision = choice("precision", calibrate::precision_by_name);
  }
  s.allow_oversubscribe = yaml::optional<bool>(node, "allow_oversubscribe", false, origin, ctx);
  p.trace_path = yaml::optional<std::string>(node, "trace", "", origin, ctx);  // an output: like --out, from the cwd
  if (const auto v = node["variability"]) {
    const char* vctx = "scenario variability";
    yaml::check_keys(v, {"device_cv", "jitter_cv", "straggler_probability", "straggler_slowdown", "seed"}, origin, vctx);
    auto& var = p.variability;
    if (const auto d = v["device_cv"]) {
      if (d.IsScalar() && d.Scalar() == "by-class") {
        var.device_cv = sim::DEVICE_CV_BY_CLASS;
      } else {
        var.device_cv = yaml::required<double>(v, "device_cv", origin, vctx);
        if (!(std::isfinite(var.device_cv) && var.device_cv >= 0 && var.device_cv <= 1))
          yaml::fail(d, origin, vctx,
                     fmt::format("field 'device_cv' must be 'by-class' or a coefficient of variation in [0, 1], got {}",
                                 d.Scalar()));
      }
    }
    var.jitter_cv = yaml::optional<double>(v, "jitter_cv", var.jitter_cv, origin, vctx);
    var.straggler_probability = yaml::optional<double>(v, "straggler_probability", var.straggler_probability, origin, vctx);
    var.straggler_slowdown = yaml::optional<double>(v, "straggler_slowdown", var.straggler_slowdown, origin, vctx);
    var.seed = yaml::optional<std::uint64_t>(v, "seed", var.seed, origin, vctx);
    if (v["jitter_cv"]) yaml::require_non_negative(var.jitter_cv, v["jitter_cv"], "jitter_cv", origin, vctx);
    if (!(var.straggler_probability >= 0 && var.straggler_probability <= 1))
      yaml::fail(v["straggler_probability"], origin, vctx, "field 'straggler_probability' must be in [0, 1]");
    if (!(var.straggler_slowdown >= 1))
      yaml::fail(v["straggler_slowdown"], origin, vctx, "field 'straggler_slowdown' must be >= 1");
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

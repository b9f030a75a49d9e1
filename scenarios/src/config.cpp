// The configuration header of predict/sweep/compare (values, defaults, calibration coverage) and the
// resolved scenario written back as YAML for --dump-config.
#include "scenarios/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "common/text.hpp"
#include "models/zoo.hpp"
#include "platforms/platform.hpp"

namespace dtsim::scenarios {
namespace {

constexpr double BYTES_PER_MIB = 1024.0 * 1024.0;
constexpr double MS_PER_S = 1e3;
// A sweep over many models and batches would time every distinct profile: the header samples this many.
constexpr std::size_t MAX_COVERAGE_CONFIGS = 24;

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

std::string ps_balance_name(sim::PsBalance b) { return sim::to_string(b); }
std::string data_name(sim::DataMode d) { return d == sim::DataMode::REAL ? "real" : "synthetic"; }

bool looks_like_path(const std::string& v) {
  return v.find('/') != std::string::npos || v.ends_with(".yaml") || v.ends_with(".yml");
}
std::string absolute_if_path(const std::string& v) {
  return looks_like_path(v) ? std::filesystem::absolute(v).lexically_normal().string() : v;
}

// One (key, text) per header field of a scenario, in display order.
// `labels` caches platform_label: a sweep's points mostly share a few platform files.
// `loaded` caches the platforms the library and variability are resolved against (nullopt: did not load).
std::vector<std::pair<std::string, std::string>> field_texts(
    const Scenario& s, std::map<std::string, std::string>& labels,
    std::map<std::string, std::optional<platforms::Platform>>& loaded) {
  const auto& p = s.point;
  auto label = labels.find(s.platform);
  if (label == labels.end()) label = labels.emplace(s.platform, platform_label(s.platform)).first;
  auto platform = loaded.find(s.platform);
  if (platform == loaded.end()) {
    std::optional<platforms::Platform> pl;
    try {
      pl = platforms::load_platform(s.platform);
    } catch (const std::exception&) {
      // The prediction reports the error with its file, line and field.
    }
    platform = loaded.emplace(s.platform, std::move(pl)).first;
  }
  std::vector<std::pair<std::string, std::string>> f{
      {"model", s.model},
      {"platform", label->second},
      {"workers", join(s.workers)},
      {"batch", fmt::format("{} per worker", s.batch)},
      {"strategy", sim::to_string(p.strategy)},
  };
  if (sim::uses_servers(p.strategy)) {
    f.emplace_back("ps", s.ps_auto ? "auto" : s.ps.empty() ? "1" : join(s.ps));
    f.emplace_back("ps_placement", sim::to_string(p.ps_placement));
  }
  f.emplace_back("framework", p.framework.name);
  if (platform->second) {
    try {
      const auto lib = sim::resolve_collective_library(*platform->second, p);
      const std::string from = lib.source != "named"               ? lib.source
                               : s.field_origin.count("collective_library") ? "scenario"
                                                                             : "--collective-library";
      f.emplace_back("collective_library", fmt::format("{} ({})", lib.name, from));
      const auto spread = sim::resolve_device_spread(*platform->second, p);
      std::string var = spread.cv > 0 ? fmt::format("device cv {:.2f}% ({})", spread.cv * 100, spread.source)
                                      : std::string("device spread off");
      if (p.variability.jitter_cv > 0) var += fmt::format(", jitter cv {:g}%", p.variability.jitter_cv * 100);
      if (p.variability.straggler_probability > 0)
        var += fmt::format(", stragglers {:g}% x{:g}", p.variability.straggler_probability * 100,
                           p.variability.straggler_slowdown);
      f.emplace_back("variability", var);
    } catch (const std::exception&) {
      // An unknown library in the platform file: the prediction reports it with the file and line.
    }
  }
  f.emplace_back("fusion_mb", fmt::format("{:g} MiB", p.fusion_bytes / BYTES_PER_MIB));
  if (p.cycle_s > 0) f.emplace_back("cycle_ms", human_seconds(p.cycle_s));
  f.emplace_back("precision", std::string(calibrate::to_string(s.precision)));
  f.emplace_back("comm_mode", sim::to_string(p.comm_mode));
  f.emplace_back("data", data_name(p.data));
  return f;
}

// Loads what predict_scenario loads before simulating and returns the profile's coverage.
Coverage coverage_of(const Scenario& s) {
  const platforms::Platform platform = platforms::load_platform(s.platform);
  models::ModelOptions mo;
  mo.batch = s.batch;
  mo.input_h = s.input_h;
  mo.input_w = s.input_w;
  mo.classes = s.classes;
  const models::Model model = models::load_model(s.model, mo);
  calibrate::ProfileOptions po;
  po.threads = s.threads;
  po.workers_per_node = s.point.workers_per_node > 0 ? s.point.workers_per_node : platform.default_workers_per_node();
  po.cpu_sockets = platform.node.cpu_sockets;
  po.db_path = s.db_path;
  po.precision = s.precision;
  const auto profile = calibrate::build_profile(model, platform.worker_device(), po);
  return Coverage{model.name(), profile.device, s.batch, profile.coverage, calibrate::describe_sources(profile)};
}

// The sweep block with its file values (model, platform, calibration_db) made absolute against the
// scenario's folder, where parse_scenario_node would have resolved them.
YAML::Node absolute_sweep(const YAML::Node& sweep, const std::string& scenario_file) {
  YAML::Node copy = YAML::Clone(sweep);
  const auto dir = std::filesystem::path(scenario_file).parent_path();
  auto fix_axes = [&](YAML::Node axes) {
    if (!axes.IsMap()) return;
    for (auto item : axes) {
      const std::string field = item.first.Scalar();
      if ((field != "model" && field != "platform" && field != "calibration_db") || !item.second.IsSequence()) continue;
      for (std::size_t i = 0; i < item.second.size(); ++i) {
        YAML::Node v = item.second[i];
        if (!v.IsScalar()) continue;
        const std::string text = v.Scalar();
        if (!looks_like_path(text) && field != "calibration_db") continue;
        const std::filesystem::path path(text);
        v = absolute_if_path(path.is_absolute() ? text : (dir / path).string());
      }
    }
  };
  fix_axes(copy["product"]);
  if (const YAML::Node zip = copy["zip"]; zip.IsSequence()) {
    for (auto group : zip) fix_axes(group);
  } else if (zip.IsMap()) {
    fix_axes(zip);
  }
  return copy;
}

}  // namespace

std::string platform_label(const std::string& platform) {
  if (!looks_like_path(platform)) return platform;
  try {
    return platforms::load_platform(platform).name;
  } catch (const std::exception&) {
    return platform;
  }
}

double ConfigSummary::min_measured_share() const {
  double m = 1;
  for (const auto& c : coverage) m = std::min(m, c.measured_share);
  return m;
}

ConfigSummary summarize_config(const std::vector<Scenario>& scenarios, const std::set<std::string>& given) {
  ConfigSummary out;
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> values;  // distinct values in first-seen order
  std::map<std::string, bool> set_somewhere;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::optional<platforms::Platform>> loaded;
  for (const auto& s : scenarios) {
    for (const auto& [key, text] : field_texts(s, labels, loaded)) {
      if (!values.count(key)) order.push_back(key);
      auto& v = values[key];
      if (std::find(v.begin(), v.end(), text) == v.end()) v.push_back(text);
      set_somewhere[key] = set_somewhere[key] || s.field_origin.count(key) > 0 || given.count(key) > 0;
    }
  }
  for (const auto& key : order) {
    const auto& v = values[key];
    std::string text;
    for (const auto& x : v) text += (text.empty() ? "" : ", ") + x;
    if (v.size() > 1) text += " (swept)";
    // A framework sets the fusion size and cycle: those are then the framework's, not dtsim's defaults.
    bool set = set_somewhere[key];
    if ((key == "fusion_mb" || key == "cycle_ms") && set_somewhere["framework"]) set = true;
    // These say where their value came from in the value itself.
    if (key == "collective_library" || key == "variability") set = true;
    out.fields.push_back({key, text, !set});
  }
  std::set<std::tuple<std::string, std::string, int, int, int, int, int, std::string, int, std::string>> seen;
  for (const auto& s : scenarios) {
    const auto key = std::tuple(s.model, s.platform, s.batch, s.input_h, s.input_w, s.classes, s.threads,
                                std::string(calibrate::to_string(s.precision)), s.point.workers_per_node, s.db_path);
    if (!seen.insert(key).second || out.coverage.size() >= MAX_COVERAGE_CONFIGS) continue;
    try {
      out.coverage.push_back(coverage_of(s));
    } catch (const std::exception&) {
      // The prediction of this scenario reports the error with its file, line and field.
    }
  }
  return out;
}

std::string config_header(const ConfigSummary& summary) {
  std::vector<std::string> items;
  for (const auto& f : summary.fields) {
    std::string key = f.key;
    std::replace(key.begin(), key.end(), '_', ' ');
    if (key == "fusion mb") key = "fusion";
    if (key == "cycle ms") key = "cycle";
    items.push_back(fmt::format("{} {}{}", key, f.value, f.is_default ? " (default)" : ""));
  }
  // Wrap the items into lines of about 100 characters.
  constexpr std::size_t LINE_CHARS = 100;
  std::string out, line;
  for (const auto& item : items) {
    if (!line.empty() && line.size() + 2 + item.size() > LINE_CHARS) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + item;
  }
  if (!line.empty()) out += line + "\n";
  if (summary.coverage.size() == 1) {
    const auto& c = summary.coverage.front();
    out += fmt::format("calibration: {:.0f}% of {}'s compute on {} from measured entries, {:.0f}% estimated\n",
                       100 * c.measured_share, c.model, c.device, 100 * (1 - c.measured_share));
    if (!c.sources.empty()) out += fmt::format("compute time from: {}\n", c.sources);
  } else if (!summary.coverage.empty()) {
    double lo = 1, hi = 0;
    for (const auto& c : summary.coverage) {
      lo = std::min(lo, c.measured_share);
      hi = std::max(hi, c.measured_share);
    }
    const std::string share =
        std::lround(100 * lo) == std::lround(100 * hi) ? fmt::format("{:.0f}%", 100 * lo)
                                                       : fmt::format("{:.0f}% to {:.0f}%", 100 * lo, 100 * hi);
    out += fmt::format("calibration: {} of the compute from measured entries ({} model/device configurations)\n",
                       share, summary.coverage.size());
  }
  const std::string warning = coverage_warning(summary);
  if (!warning.empty()) out += warning + "\n";
  return out + "\n";
}

std::string coverage_warning(const ConfigSummary& summary) {
  const Coverage* worst = nullptr;
  for (const auto& c : summary.coverage)
    if (worst == nullptr || c.measured_share < worst->measured_share) worst = &c;
  if (worst == nullptr || worst->measured_share >= MIN_MEASURED_COVERAGE) return "";
  return fmt::format("warning: only {:.0f}% of {}'s compute (batch {}) comes from measured calibration entries, the "
                     "rest is estimated; `dtsim calibrate --model {} --batch {}` measures it",
                     100 * worst->measured_share, worst->model, worst->batch, worst->model, worst->batch);
}

nlohmann::json config_json(const ConfigSummary& summary) {
  nlohmann::json fields = nlohmann::json::object();
  nlohmann::json defaults = nlohmann::json::array();
  for (const auto& f : summary.fields) {
    fields[f.key] = f.value;
    if (f.is_default) defaults.push_back(f.key);
  }
  nlohmann::json calibration = nlohmann::json::array();
  for (const auto& c : summary.coverage)
    calibration.push_back(
        {{"model", c.model}, {"device", c.device}, {"batch", c.batch}, {"measured_share", c.measured_share},
         {"sources", c.sources}});
  nlohmann::json out{{"fields", fields}, {"defaults", defaults}, {"calibration", calibration}};
  const std::string warning = coverage_warning(summary);
  if (!warning.empty()) out["warning"] = warning;
  return out;
}

std::string scenario_to_yaml(const Scenario& s, const YAML::Node& sweep) {
  const auto& p = s.point;
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << s.name;
  if (!s.description.empty()) e << YAML::Key << "description" << YAML::Value << s.description;
  e << YAML::Key << "model" << YAML::Value << absolute_if_path(s.model);
  e << YAML::Key << "platform" << YAML::Value << absolute_if_path(s.platform);
  e << YAML::Key << "workers" << YAML::Value << YAML::Flow << s.workers;
  e << YAML::Key << "batch" << YAML::Value << s.batch;
  e << YAML::Key << "input_h" << YAML::Value << s.input_h << YAML::Comment("0 = the model's default");
  e << YAML::Key << "input_w" << YAML::Value << s.input_w;
  e << YAML::Key << "classes" << YAML::Value << s.classes;
  e << YAML::Key << "workers_per_node" << YAML::Value << p.workers_per_node << YAML::Comment("0 = the platform's");
  e << YAML::Key << "threads" << YAML::Value << s.threads << YAML::Comment("0 = a socket's cores / workers");
  e << YAML::Key << "strategy" << YAML::Value << sim::to_string(p.strategy);
  e << YAML::Key << "framework" << YAML::Value << p.framework.name;
  if (!p.collective_library.empty()) e << YAML::Key << "collective_library" << YAML::Value << p.collective_library;
  if (s.ps_auto) {
    e << YAML::Key << "ps" << YAML::Value << "auto";
  } else if (!s.ps.empty()) {
    e << YAML::Key << "ps" << YAML::Value << YAML::Flow << s.ps;
  }
  e << YAML::Key << "ps_placement" << YAML::Value << sim::to_string(p.ps_placement);
  e << YAML::Key << "ps_balance" << YAML::Value << ps_balance_name(p.ps_balance);
  e << YAML::Key << "fusion_mb" << YAML::Value << fmt::format("{}", p.fusion_bytes / BYTES_PER_MIB);
  e << YAML::Key << "cycle_ms" << YAML::Value << fmt::format("{}", p.cycle_s * MS_PER_S);
  e << YAML::Key << "overlap" << YAML::Value << p.overlap;
  e << YAML::Key << "data" << YAML::Value << data_name(p.data);
  const double sample_bytes =
      p.data == sim::DataMode::REAL && p.sample_bytes <= 0 ? IMAGENET_MEAN_SAMPLE_BYTES : p.sample_bytes;
  e << YAML::Key << "sample_bytes" << YAML::Value << fmt::format("{}", sample_bytes);
  e << YAML::Key << "prefetch_depth" << YAML::Value << p.prefetch_depth;
  e << YAML::Key << "metadata_ops_per_sample" << YAML::Value << fmt::format("{}", p.metadata_ops_per_sample);
  e << YAML::Key << "preprocess_ms_per_sample" << YAML::Value << fmt::format("{}", p.preprocess_s_per_sample * MS_PER_S);
  if (p.iterations > 0)
    e << YAML::Key << "iterations" << YAML::Value << p.iterations;
  else  // left to each strategy: a sweep over strategies may mix synchronous and asynchronous ones
    e << YAML::Newline
      << YAML::Comment(fmt::format("iterations: by strategy ({}; asynchronous {})", sim::SYNC_ITERATIONS,
                                   sim::ASYNC_ITERATIONS));
  if (s.anchor_samples_per_s) e << YAML::Key << "anchor" << YAML::Value << fmt::format("{}", *s.anchor_samples_per_s);
  if (!s.db_path.empty())
    e << YAML::Key << "calibration_db" << YAML::Value << std::filesystem::absolute(s.db_path).lexically_normal().string();
  e << YAML::Key << "comm_mode" << YAML::Value << sim::to_string(p.comm_mode);
  if (!p.trace_path.empty()) e << YAML::Key << "trace" << YAML::Value << p.trace_path;
  e << YAML::Key << "variability" << YAML::Value << YAML::BeginMap;
  if (p.variability.device_cv == sim::DEVICE_CV_BY_CLASS) {
    e << YAML::Key << "device_cv" << YAML::Value << "by-class";
  } else {
    e << YAML::Key << "device_cv" << YAML::Value << fmt::format("{}", p.variability.device_cv);
  }
  e << YAML::Key << "jitter_cv" << YAML::Value << fmt::format("{}", p.variability.jitter_cv);
  e << YAML::Key << "straggler_probability" << YAML::Value << fmt::format("{}", p.variability.straggler_probability);
  e << YAML::Key << "straggler_slowdown" << YAML::Value << fmt::format("{}", p.variability.straggler_slowdown);
  e << YAML::Key << "seed" << YAML::Value << p.variability.seed;
  e << YAML::EndMap;
  e << YAML::Key << "precision" << YAML::Value << std::string(calibrate::to_string(s.precision));
  e << YAML::Key << "allow_oversubscribe" << YAML::Value << s.allow_oversubscribe;
  if (sweep && !sweep.IsNull()) e << YAML::Key << "sweep" << YAML::Value << absolute_sweep(sweep, s.file);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace dtsim::scenarios

// The configuration header of predict/sweep/compare (values, defaults, calibration coverage) and the
// resolved scenario written back as YAML for --dump-config.
#include "scenarios/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "common/text.hpp"
#include "models/zoo.hpp"
#include "platforms/platform.hpp"
#include "scenarios/fields.hpp"

namespace dtsim::scenarios {
namespace {

// A sweep over many models and batches would time every distinct profile: the header samples this many.
constexpr std::size_t MAX_COVERAGE_CONFIGS = 24;

bool looks_like_path(const std::string& v) {
  return v.find('/') != std::string::npos || v.ends_with(".yaml") || v.ends_with(".yml");
}
std::string absolute_if_path(const std::string& v) {
  return looks_like_path(v) ? std::filesystem::absolute(v).lexically_normal().string() : v;
}

// One (key, text) per header field of a scenario, in the field table's order.
// `labels` caches platform_label: a sweep's points mostly share a few platform files.
// `loaded` caches the platforms the library and variability are resolved against (nullopt: did not load).
std::vector<std::pair<std::string, std::string>> field_texts(
    const Scenario& s, std::map<std::string, std::string>& labels,
    std::map<std::string, std::optional<platforms::Platform>>& loaded) {
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
  const HeaderContext context{label->second, platform->second ? &*platform->second : nullptr};
  std::vector<std::pair<std::string, std::string>> f;
  for (const auto& field : scenario_fields()) {
    if (field.header == nullptr) continue;
    std::string text = field.header(s, context);
    if (!text.empty()) f.emplace_back(field.top_key(), std::move(text));
  }
  return f;
}

// What predict_scenario loads before simulating (the same preparation): the profile's coverage.
Coverage coverage_of(const Scenario& s) {
  const ComputeSource c = compute_source(s);
  return Coverage{c.model, c.device, c.batch, c.coverage, c.sources};
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
  YAML::Emitter e;
  e << YAML::BeginMap;
  auto emit = [&](const std::string& key, const FieldDump& d) {
    if (d.value.IsNull()) {
      if (!d.comment.empty()) e << YAML::Newline << YAML::Comment(d.comment);
      return;
    }
    e << YAML::Key << key << YAML::Value << d.value;
    if (!d.comment.empty()) e << YAML::Comment(d.comment);
  };
  const auto& fields = scenario_fields();
  std::set<std::string> written;  // nested maps, written whole at their first field
  for (const auto& f : fields) {
    const std::string top = f.top_key();
    if (top == f.key) {
      emit(f.key, f.write(s));
      continue;
    }
    if (!written.insert(top).second) continue;
    e << YAML::Key << top << YAML::Value << YAML::BeginMap;
    for (const auto& g : fields)
      if (g.top_key() == top && g.key != top) emit(g.leaf_key(), g.write(s));
    e << YAML::EndMap;
  }
  if (sweep && !sweep.IsNull()) e << YAML::Key << "sweep" << YAML::Value << absolute_sweep(sweep, s.file);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace dtsim::scenarios

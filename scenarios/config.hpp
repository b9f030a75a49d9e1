// What a prediction assumed: a short configuration header (every field with its value, defaults
// marked, the calibration coverage) for predict/sweep/compare output, and the fully resolved
// scenario written back as YAML (`--dump-config`) that `dtsim predict` and `dtsim sweep` load again.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"

namespace dtsim::scenarios {

// Below this share of the model's forward+backward time from measured calibration entries (the rest
// estimated from op-class efficiencies), the header warns: the prediction rests on estimates.
inline constexpr double MIN_MEASURED_COVERAGE = 0.9;

struct ConfigField {
  std::string key;    // "model", "batch", ...
  std::string value;  // "resnet50"; several scenarios with different values: "a, b (swept)"
  bool is_default = false;  // no scenario file or flag set it
};

// Calibration coverage of one compute configuration (model, device, batch, precision ...).
struct Coverage {
  std::string model, device;
  int batch = 0;
  double measured_share = 0;  // of forward+backward time, from calibration entries measured on this host
  std::string sources;        // each source of that time with its share (calibrate::describe_sources)
};

struct ConfigSummary {
  std::vector<ConfigField> fields;
  std::vector<Coverage> coverage;  // one per distinct compute configuration that loaded
  double min_measured_share() const;  // 1 when coverage is empty
};

// Summarises the scenarios of one command (one for predict, one per point of a sweep or comparison).
// A field counts as set when it is in a scenario's field_origin or in `given` (flag names without
// dashes, '-' as '_'). Loads platforms, models and the calibration (no simulation); a scenario that
// does not load is left out of the coverage (its prediction reports the error).
ConfigSummary summarize_config(const std::vector<Scenario>& scenarios, const std::set<std::string>& given = {});

// The header for table output: a few lines of "key value" pairs and the coverage line, then a blank line.
std::string config_header(const ConfigSummary& summary);
// One warning line (no newline) when less than MIN_MEASURED_COVERAGE is measured, else empty.
std::string coverage_warning(const ConfigSummary& summary);
// The header as a JSON object: {"fields": {key: value}, "defaults": [keys], "calibration": [...]}.
nlohmann::json config_json(const ConfigSummary& summary);

// How results name a platform: its `name:` field (a shipped platform's name is its own); a file
// that does not load is named by its path (its prediction reports the error).
std::string platform_label(const std::string& platform);

// The scenario with every field written out (defaults resolved, file paths absolute) as a YAML
// scenario file; `sweep` (may be null) is appended as the file's sweep block.
std::string scenario_to_yaml(const Scenario& scenario, const YAML::Node& sweep = YAML::Node());

}  // namespace dtsim::scenarios

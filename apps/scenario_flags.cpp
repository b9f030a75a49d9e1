#include "apps/scenario_flags.hpp"

#include <cctype>

#include "scenarios/fields.hpp"

namespace dtsim::apps {

std::set<std::string> ScenarioFlags::given_fields() const {
  std::set<std::string> out;
  for (const auto& f : scenarios::scenario_fields())
    if (!f.flag.empty() && given(f.flag)) out.insert(f.top_key());
  return out;
}

scenarios::Scenario ScenarioFlags::build() const {
  scenarios::Scenario s;
  if (!scenario.empty()) s = scenarios::load_scenario(scenario);
  else s.name = "cli";
  for (const auto& f : scenarios::scenario_fields()) {
    if (f.flag.empty() || !given(f.flag)) continue;
    const std::string text = f.flag_kind == scenarios::FlagKind::SETS_TRUE    ? "true"
                             : f.flag_kind == scenarios::FlagKind::SETS_FALSE ? "false"
                                                                              : field_text.at(f.key);
    scenarios::apply_flag(s, f, text);
  }
  if (no_variability) s.point.variability = sim::Variability::none();
  for (const std::string& field : given_fields()) s.field_origin.erase(field);
  return s;
}

void add_scenario_flags(CLI::App* cmd, ScenarioFlags& flags) {
  flags.cmd = cmd;
  cmd->add_option("scenario", flags.scenario, "Scenario YAML file (docs/scenario-schema.md); flags override it");
  for (const auto& f : scenarios::scenario_fields()) {
    if (f.flag.empty()) continue;
    std::string heading = f.group;
    heading[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(heading[0])));
    if (f.flag_kind == scenarios::FlagKind::VALUE) {
      // The value's kind in --help, from the row's type in words.
      const char* kind = f.type.starts_with("int >=") || f.type.starts_with("int in") ? "INT"
                         : f.type.starts_with("number")                              ? "NUMBER"
                                                                                     : "TEXT";
      cmd->add_option(f.flag, flags.field_text[f.key], f.help)->type_name(kind)->group(heading);
    } else {
      cmd->add_flag(f.flag, f.help)->group(heading);
    }
  }
  cmd->add_flag("--no-variability", flags.no_variability,
                "Every worker computes alike: no device spread (default on: GPUs 1.48%, CPUs 2.08% CV, "
                "docs/simulation-training.md) and none of the scenario's jitter or stragglers")
      ->group("Variability");
}

}  // namespace dtsim::apps

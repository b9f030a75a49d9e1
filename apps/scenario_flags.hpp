// The scenario field table's flags (scenarios/fields.hpp) on a subcommand: `dtsim predict` and `dtsim plan`
// take every field the table gives a flag, listed in --help under the part of the set-up it belongs to.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <set>
#include <string>

#include "scenarios/scenario.hpp"

namespace dtsim::apps {

struct ScenarioFlags {
  std::string scenario;  // the positional scenario file ("" = none)
  // The text of each field's flag, by key (a switch reads "true" or "false").
  std::map<std::string, std::string> field_text;
  bool no_variability = false;
  const CLI::App* cmd = nullptr;
  bool given(const std::string& flag) const { return cmd->count(flag) > 0; }
  // The keys of the fields set by flags.
  std::set<std::string> given_fields() const;
  // The scenario file (or an empty "cli" scenario) with the flags applied in the table's order, as a file
  // is read (--framework before the --fusion-mb that overrides it); a flag's value replaces the file's,
  // and errors about it then name the flag, not the file.
  scenarios::Scenario build() const;
};

// The positional scenario, one flag per table field (option groups "Job", "Parallel layout", "Parameter
// servers", ... as the table groups them) and --no-variability, bound to `flags`.
void add_scenario_flags(CLI::App* cmd, ScenarioFlags& flags);

}  // namespace dtsim::apps

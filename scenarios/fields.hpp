// The one field table of a scenario (docs/scenario-schema.md): every value a user can write for a
// training point, with its YAML key, `dtsim predict` flag, parser, writer and header text. Strict
// scenario parsing, --dump-config, the configuration header and predict's flags are generated from it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "common/yaml_util.hpp"

namespace dtsim::platforms {
struct Platform;
}

namespace dtsim::scenarios {

struct Scenario;

// What part of the set-up a field describes: the part of sim::TrainingPoint it lands in (job fields are the
// scenario's own) and the heading docs/scenario-schema.md lists it under.
inline constexpr const char* GROUP_JOB = "job";  // what is trained, where, from which calibration
inline constexpr const char* GROUP_LAYOUT = "parallel layout";   // workers, their placement, the exchange
inline constexpr const char* GROUP_PS = "parameter servers";  // the ps* strategies' servers
inline constexpr const char* GROUP_RUNTIME = "runtime";          // framework, libraries, buckets, overlap
inline constexpr const char* GROUP_INPUT = "input";              // the data pipeline
inline constexpr const char* GROUP_VARIABILITY = "variability";  // how the workers' compute varies
inline constexpr const char* GROUP_FIDELITY =
    "fidelity knobs";  // how the simulation runs and what it assumes

// How a field's `dtsim predict` flag is given: with a value, or as a switch that sets a boolean.
enum class FlagKind { NONE, VALUE, SETS_TRUE, SETS_FALSE };

// One value being read into a field: a scenario file's node, or a flag's text. Errors name the file,
// line and field, or the flag.
class FieldInput {
 public:
  FieldInput(YAML::Node value, const yaml::Origin& origin, std::string context, std::string key);
  FieldInput(const std::string& text, std::string flag);
  const YAML::Node& node() const { return value_; }
  // The scenario file the value came from ("" for a flag: paths then stay relative to the working directory).
  const std::string& file() const;
  // "s.yaml:3: field 'workers'" or "--workers": the prefix of a message about the value.
  std::string label() const;
  // The name a name table puts in its error: the key ("strategy") or the flag ("--strategy").
  const std::string& what() const { return flag_.empty() ? key_ : flag_; }
  // Throws InputError "s.yaml:3: scenario: field 'batch' MESSAGE" or "--batch: MESSAGE".
  [[noreturn]] void fail(std::string_view message) const;
  // The scalar as T; an error naming the expected type otherwise.
  template <class T>
  T as() const;
  // parse(text) for a named choice; its InputError gets the file and line in front.
  template <class F>
  auto choose(const F& parse) const -> decltype(parse(std::string()));

 private:
  // A name table's "unknown ..." message with this field's name in front, in place of the name the
  // table uses for itself ("--mode: unknown mode 'x'" -> "comm_mode: unknown mode 'x'").
  std::string named_choice_error(const std::string& message) const;

  YAML::Node value_;
  const yaml::Origin* origin_ = nullptr;  // null for a flag
  std::string context_, key_, flag_;
};

// What the header of one scenario is shown against: its platform's label and the platform when it loaded.
struct HeaderContext {
  std::string platform_label;
  const platforms::Platform* platform = nullptr;  // null: did not load (the prediction reports why)
};

// A field's value as written by --dump-config: a YAML value (a null node: the key is left out) and a
// comment (after the value, or alone when the key is left out).
struct FieldDump {
  YAML::Node value;
  std::string comment;
};

// One row: adding a field a user can write is adding one of these (scenario_fields()).
struct ScenarioField {
  std::string key{};            // YAML key; "variability.seed" for a key of a nested map
  const char* group = nullptr;  // GROUP_*
  std::string type{};           // in words ("int >= 1"), for docs
  std::string default_text{};   // in words, for docs
  std::string help{};           // `dtsim predict --help`
  std::string flag{};           // "--fusion-mb"; empty when the field has no flag
  FlagKind flag_kind = FlagKind::NONE;
  bool required = false;  // a scenario file must hold it
  std::string example{};  // a valid value other than the default, in YAML (tests, docs)
  void (*parse)(Scenario& s, const FieldInput& in) = nullptr;
  FieldDump (*write)(const Scenario& s) = nullptr;
  // The header's text for this field, "" when the header leaves it out; null: never in the header.
  std::string (*header)(const Scenario& s, const HeaderContext& context) = nullptr;
  // "variability" for "variability.seed", else the key: the top-level scenario key it is written under.
  std::string top_key() const { return key.substr(0, key.find('.')); }
  // "seed" for "variability.seed", else the key.
  std::string leaf_key() const {
    return key.substr(key.find('.') == std::string::npos ? 0 : key.find('.') + 1);
  }
};

// Every field, in the order they are read (a framework's defaults before fusion_mb and cycle_ms override
// them), written and shown in the header.
const std::vector<ScenarioField>& scenario_fields();
// The row whose key is `key`, or null.
const ScenarioField* scenario_field_or_null(std::string_view key);

// Sets the field from a flag's text (a switch: "true"), errors naming the flag.
void apply_flag(Scenario& s, const ScenarioField& field, const std::string& text);

}  // namespace dtsim::scenarios

#include "scenarios/src/fields_impl.hpp"

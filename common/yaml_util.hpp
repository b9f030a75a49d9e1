// Strict YAML reading shared by every schema (models, devices, platforms, scenarios):
// unknown keys are errors, and every error names file, line, field and what was expected.
#pragma once
#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::yaml {

// Where a node came from, for messages: "file.yaml:12".
struct Origin {
  std::string file;
  std::string where(const YAML::Node& node) const;
};

// Parses a whole file; malformed YAML or a missing file throws InputError naming the file and line.
YAML::Node load_file(const std::string& path);
// Parses YAML text; `label` stands in for the file name in messages.
YAML::Node load_string(const std::string& text, const std::string& label);

// Throws InputError unless `node` is a map whose keys are all in `allowed`;
// `context` names the object (e.g. "network", "layer 'conv1'").
void check_keys(const YAML::Node& node, std::initializer_list<std::string_view> allowed,
                const Origin& origin, std::string_view context);
void check_keys(const YAML::Node& node, const std::vector<std::string>& allowed, const Origin& origin,
                std::string_view context);

// Required scalar field converted to T; throws InputError naming the field and the expected type.
template <class T>
T required(const YAML::Node& map, std::string_view key, const Origin& origin, std::string_view context);
// Optional scalar field; `fallback` when absent.
template <class T>
T optional(const YAML::Node& map, std::string_view key, T fallback, const Origin& origin,
           std::string_view context);

// Number checks with messages: "file:line: field 'x' of context must be > 0, got -3".
double require_positive(double value, const YAML::Node& at, std::string_view key, const Origin& origin,
                        std::string_view context);
double require_non_negative(double value, const YAML::Node& at, std::string_view key, const Origin& origin,
                            std::string_view context);

// Throws InputError "file:line: context: message".
[[noreturn]] void fail(const YAML::Node& at, const Origin& origin, std::string_view context,
                       std::string_view message);

}  // namespace dtsim::yaml

#include "common/src/yaml_util_impl.hpp"

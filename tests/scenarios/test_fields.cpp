// The scenario field table: every field round-trips through --dump-config's writer and the parser, from
// a file and from predict's flags; every flag is in `dtsim predict --help`; docs/scenario-schema.md lists
// exactly the table's keys and flags.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/errors.hpp"
#include "scenarios/config.hpp"
#include "scenarios/fields.hpp"
#include "tests/support/run_cli.hpp"

using namespace dtsim;
using scenarios::Scenario;
using scenarios::ScenarioField;

namespace {

// Every field at its default but the required ones, and a trace (which trace_iterations needs).
constexpr const char* BASE = "model: lenet5\nplatform: ntua-vm\ntrace: base.json\n";

Scenario parse(const YAML::Node& node, const std::string& file = "s.yaml") {
  return scenarios::parse_scenario_node(node, yaml::Origin{file});
}

// Puts `value` at the field's key (a nested key inside its map).
void set_field(YAML::Node node, const ScenarioField& f, const std::string& value) {
  if (f.top_key() == f.key) {
    node[f.key] = YAML::Load(value);
  } else {
    node[f.top_key()][f.leaf_key()] = YAML::Load(value);
  }
}

// The scenario as its values: where it was read from is not part of it.
Scenario values_of(Scenario s) {
  s.file.clear();
  s.field_origin.clear();
  return s;
}

// Dumped by the writer and read back by the parser.
Scenario reloaded(const Scenario& s) {
  const std::string text = scenarios::scenario_to_yaml(s);
  INFO(text);
  return parse(yaml::load_string(text, "dump.yaml"), "dump.yaml");
}

}  // namespace

TEST_CASE("scenarios::Fields: every field of the table round-trips through the dump", "[scenarios][fields]") {
  const Scenario base = parse(YAML::Load(BASE));
  CHECK(values_of(reloaded(base)) == values_of(base));
  std::set<std::string> keys;
  for (const auto& f : scenarios::scenario_fields()) {
    INFO("field " << f.key << " = " << f.example);
    CHECK(keys.insert(f.key).second);  // one row per key
    REQUIRE_FALSE(f.example.empty());
    REQUIRE(f.parse != nullptr);
    REQUIRE(f.write != nullptr);
    YAML::Node node = YAML::Load(BASE);
    set_field(node, f, f.example);
    const Scenario s = parse(node);
    // The parser reads the field: its example is not the default.
    CHECK(values_of(s) != values_of(base));
    // The writer writes it: loaded again, the scenario is the same.
    CHECK(values_of(reloaded(s)) == values_of(s));
  }
}

TEST_CASE("scenarios::Fields: every flag sets its field as the file's key does, and --dump-config keeps it",
          "[scenarios][fields]") {
  std::vector<std::string> args{"predict"};
  YAML::Node node = YAML::Load(BASE);
  node.remove("trace");
  for (const auto& f : scenarios::scenario_fields()) {
    set_field(node, f, f.example);
    if (f.flag.empty()) continue;
    INFO(f.flag);
    switch (f.flag_kind) {
      case scenarios::FlagKind::VALUE:
        args.insert(args.end(), {f.flag, f.example});
        break;
      case scenarios::FlagKind::SETS_TRUE:
        CHECK(f.example == "true");
        args.push_back(f.flag);
        break;
      case scenarios::FlagKind::SETS_FALSE:
        CHECK(f.example == "false");
        args.push_back(f.flag);
        break;
      case scenarios::FlagKind::NONE:
        FAIL("a flag without a kind");
    }
  }
  // The fields without a flag come from a file, which the flags override.
  const auto dir = std::filesystem::temp_directory_path() / ("dtsim_fields_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  YAML::Node file_only = YAML::Load("model: lenet5\nplatform: ntua-vm\n");
  for (const auto& f : scenarios::scenario_fields())
    if (f.flag.empty()) set_field(file_only, f, f.example);
  std::ofstream(dir / "file.yaml") << YAML::Dump(file_only) << '\n';
  args.insert(args.begin() + 1, (dir / "file.yaml").string());
  args.insert(args.end(), {"--dump-config", "-"});
  const auto r = test::run_cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const Scenario from_flags = parse(yaml::load_string(r.out, "dump.yaml"), "dump.yaml");
  const Scenario from_file = parse(node, "x.yaml");
  CHECK(values_of(from_flags) == values_of(from_file));
  std::filesystem::remove_all(dir);
}

TEST_CASE("scenarios::Fields: every flag of the table is in dtsim predict --help", "[scenarios][fields]") {
  const auto r = test::run_cli({"predict", "--help"});
  REQUIRE(r.exit_code == 0);
  // CLI11 lists each option on a line of its own: "  --fusion-mb TEXT  Gradient fusion ...".
  std::set<std::string> listed;
  std::istringstream lines(r.out);
  std::string line;
  const std::regex option(R"(^\s+(-[a-zA-Z],)?(--[a-z-]+)( .*)?$)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, option)) listed.insert(m[2]);
  }
  for (const auto& f : scenarios::scenario_fields()) {
    if (f.flag.empty()) continue;
    INFO(f.flag);
    CHECK(listed.count(f.flag) == 1);
  }
}

TEST_CASE("scenarios::Fields: bad values are one-line errors naming the file and line, or the flag",
          "[scenarios][fields]") {
  for (const auto& f : scenarios::scenario_fields()) {
    if (f.type == "string") continue;  // any text is a name or a path: checked when it is loaded
    INFO(f.key);
    YAML::Node node = YAML::Load(BASE);
    set_field(node, f, "[bad]");
    std::string message;
    try {
      parse(yaml::load_string(YAML::Dump(node), "s.yaml"));
    } catch (const InputError& e) {
      message = e.what();
    }
    CHECK(message.find("s.yaml:") != std::string::npos);
    CHECK(message.find(f.leaf_key()) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    if (f.flag_kind != scenarios::FlagKind::VALUE) continue;
    Scenario s = parse(YAML::Load(BASE));
    CHECK_THROWS_WITH(scenarios::apply_flag(s, f, "x-bad"), Catch::StartsWith(f.flag + ": "));
  }
  // An unknown key lists every allowed one, nested maps their own.
  std::string unknown;
  try {
    parse(yaml::load_string("model: a\nplatform: b\nbogus: 1\n", "s.yaml"));
  } catch (const InputError& e) {
    unknown = e.what();
  }
  CHECK(unknown.find("s.yaml:3") != std::string::npos);
  for (const auto& f : scenarios::scenario_fields()) CHECK(unknown.find(f.top_key()) != std::string::npos);
  const auto r =
      test::run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--trace-iterations", "2"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--trace-iterations: needs a trace file") != std::string::npos);
}

TEST_CASE("scenarios::Fields: docs/scenario-schema.md lists every key with its flag", "[scenarios][fields]") {
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/docs/scenario-schema.md");
  REQUIRE(in);
  // The "Predict fields" tables, one per group: | `key` | `--flag` or - | type | default | meaning |
  std::map<std::string, std::string> documented;  // key -> "group flag"
  std::string line, group;
  bool in_fields = false;
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) in_fields = line == "## Predict fields";
    if (line.starts_with("### ")) group = line.substr(4);
    std::smatch m;
    if (in_fields && std::regex_search(line, m, std::regex(R"(^\| `([a-z_.]+)` \| (`(--[a-z-]+)`|-) \|)")))
      documented[m[1]] = group + " " + std::string(m[3]);
  }
  std::map<std::string, std::string> table;
  for (const auto& f : scenarios::scenario_fields()) table[f.key] = std::string(f.group) + " " + f.flag;
  CHECK(documented == table);
}

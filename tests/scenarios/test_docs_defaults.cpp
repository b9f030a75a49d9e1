// The defaults docs/scenario-schema.md states are the ones the binary uses: its table of keys is read
// and each single-value default compared with what `dtsim predict --dump-config` writes for a scenario
// that sets nothing but model and platform.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/support/run_cli.hpp"

using dtsim::test::run_cli;

namespace {

// The default cell's value when it is one: "`allreduce-auto`" -> "allreduce-auto", "0 (model default)"
// and "0 = GPUs per node" -> "0"; prose ("by precedence", "file stem") -> "".
std::string single_value(std::string cell) {
  cell.erase(std::remove(cell.begin(), cell.end(), '`'), cell.end());
  static const std::regex value(R"(^\s*([A-Za-z0-9.+\-]+)\s*(?:$|\(|=))");
  std::smatch m;
  return std::regex_search(cell, m, value) ? m[1].str() : "";
}

bool same_value(const std::string& doc, const std::string& dumped) {
  if (doc == dumped) return true;
  try {
    std::size_t a = 0, b = 0;
    const double x = std::stod(doc, &a), y = std::stod(dumped, &b);
    return a == doc.size() && b == dumped.size() && x == y;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

TEST_CASE("scenarios::Docs: every default docs/scenario-schema.md states is the one --dump-config writes",
          "[scenarios][docs]") {
  const auto r = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--dump-config", "-"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const YAML::Node dumped = YAML::Load(r.out);
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/docs/scenario-schema.md");
  REQUIRE(in);
  // Rows: | `key` | flag | type | default | meaning |
  static const std::regex row(R"(^\| `([a-z_]+)` \| [^|]* \| [^|]* \| ([^|]*) \|)");
  std::string line;
  int compared = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string key = m[1].str(), doc = single_value(m[2].str());
    if (doc.empty() || doc == "required") continue;
    INFO("docs/scenario-schema.md key '" << key << "': documented default '" << m[2].str() << "'");
    const YAML::Node value = dumped[key];
    if (doc == "none") {  // an unset optional: absent from the dump, or "none" (framework)
      CHECK((!value || value.as<std::string>() == "none"));
    } else if (value && value.IsScalar()) {
      CHECK(same_value(doc, value.as<std::string>()));
    } else {
      continue;  // written only when set (ps, iterations): nothing to compare
    }
    ++compared;
  }
  // The table has over twenty such keys; fewer means the row pattern no longer matches the table.
  CHECK(compared >= 20);
}

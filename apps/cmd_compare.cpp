// `dtsim compare SCENARIO --platforms A,B,C`: the same workload on several platforms, one table
// (stdout) and one plot (platforms.png/svg in --out).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "common/yaml_util.hpp"
#include "scenarios/compare.hpp"
#include "scenarios/config.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/explain.hpp"

namespace dtsim::apps {
namespace {

constexpr std::size_t PARAGRAPH_COLUMNS = 100;  // explanation paragraphs under the table

struct CompareArgs {
  std::string scenario, platforms, out, format = "table";
  int jobs = 1;
  bool no_plot = false;
};

void run(const CompareArgs& a) {
  const TextFormat format = parse_text_format(a.format);
  auto platforms = scenarios::parse_platform_list(a.platforms);
  // A platform file named on the command line is relative to the working directory, not to the
  // scenario's folder (where the scenario's own paths resolve): make it absolute before it goes in.
  for (auto& p : platforms)
    if (p.find('/') != std::string::npos || p.ends_with(".yaml") || p.ends_with(".yml"))
      p = std::filesystem::absolute(p).lexically_normal().string();
  // Results name platforms by their name: field, so two files with one name would share a row label.
  std::map<std::string, std::string> by_label;
  for (const auto& p : platforms) {
    const auto [it, fresh] = by_label.emplace(scenarios::platform_label(p), p);
    if (!fresh)
      throw InputError(fmt::format("--platforms: '{}' and '{}' are both named '{}'; give each platform file its own "
                                   "name: field",
                                   it->second, p, it->first));
  }
  const yaml::Origin origin{a.scenario};
  const YAML::Node node = yaml::load_file(a.scenario);
  if (!node.IsMap()) throw InputError(fmt::format("{}: a scenario must be a map of fields", a.scenario));
  auto points = scenarios::compare_points(node, platforms, origin);
  scenarios::stamp_points(points, origin);
  scenarios::SweepOptions opt;
  opt.jobs = a.jobs;
  opt.out_dir = a.out.empty()
                    ? (std::filesystem::path("results") / (std::filesystem::path(a.scenario).stem().string() + "-compare"))
                          .string()
                    : a.out;
  opt.progress = format == TextFormat::TABLE;
  const auto s = scenarios::run_sweep(points, origin, opt, scenarios::predict_point);
  if (s.mpi_rank != 0) return;
  if (s.interrupted) throw Failure(fmt::format("interrupted: finished platforms are kept in {}", s.jsonl_path));
  const Table t = scenarios::results_table(opt.out_dir, points);
  std::vector<scenarios::Scenario> parsed;
  for (const auto& p : points) parsed.push_back(scenarios::parse_scenario_node(p.node, origin));
  const auto config = scenarios::summarize_config(parsed);
  // The table's header carries the warning; machine formats get it on stderr instead.
  if (const auto warning = scenarios::coverage_warning(config); !warning.empty() && format != TextFormat::TABLE)
    std::cerr << "dtsim: " << warning << '\n';
  if (format == TextFormat::TABLE) std::cout << scenarios::config_header(config);
  if (format == TextFormat::JSON) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : t.rows()) {
      nlohmann::json o;
      for (std::size_t i = 0; i < r.size(); ++i) o[t.header()[i]] = r[i];
      rows.push_back(o);
    }
    // The same shape as predict's JSON: the points, then the configuration they were predicted under.
    nlohmann::json doc{{"scenario", a.scenario}, {"points", rows}};
    doc["config"] = scenarios::config_json(config);
    std::cout << doc.dump(2) << '\n';
  } else if (format == TextFormat::CSV) {
    t.print(std::cout, format);
  } else {
    // The explanation (last column) is a paragraph per point under the table, not a column that wraps.
    std::vector<std::string> header(t.header().begin(), t.header().end() - 1);
    Table shown(header);
    for (const auto& r : t.rows()) shown.add_row(std::vector<std::string>(r.begin(), r.end() - 1));
    shown.print(std::cout, format);
    for (const auto& r : t.rows())
      if (!r.back().empty()) std::cout << '\n' << scenarios::wrap_paragraph(r[1] + ": " + r.back(), PARAGRAPH_COLUMNS);
  }
  if (!a.no_plot) {
    const auto& first = parsed.front();
    const std::string files = scenarios::run_plots(
        opt.out_dir, opt.out_dir, {"--name", first.description.empty() ? first.name : first.description});
    if (format == TextFormat::TABLE) std::cout << "results: " << s.csv_path << "\nplots:\n" << files;
  }
}

const CommandRegistrar registrar("compare", 41, [](CLI::App& root) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = root.add_subcommand("compare", "Predict the same scenario on several platforms: one table, one plot");
  cmd->add_option("scenario", args->scenario, "Scenario YAML file (docs/scenario-schema.md)")->required();
  cmd->add_option("--platforms", args->platforms, "Comma-separated platform names or files, e.g. taiwania2-ib,taiwania2-10gbe")
      ->required();
  cmd->add_option("--out", args->out, "Output directory (default results/<stem>-compare)");
  cmd->add_option("-j,--jobs", args->jobs, "Platforms simulated at once")->check(CLI::Range(1, 1024));
  cmd->add_option("--format", args->format, "table, csv or json");
  cmd->add_flag("--no-plot", args->no_plot, "Skip the platform-comparison plot");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace dtsim::apps

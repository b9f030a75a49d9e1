// `dtsim accuracy`: predict every published measurement row, print measured / predicted / error per
// row and MAPE per study, and write accuracy.csv plus the predicted-vs-measured plots into --out.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "scenarios/accuracy.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::apps {
namespace {

struct AccuracyArgs {
  scenarios::AccuracyOptions opt;
  std::string out = "results/accuracy";
  std::string format = "table";
  bool no_anchor = false, no_plot = false;
};

void run(AccuracyArgs a) {
  const TextFormat format = parse_text_format(a.format);
  a.opt.anchored = !a.no_anchor;
  const auto rows = scenarios::run_accuracy(a.opt);
  Table t({"study", "variant", "workers", "ps", "strategy", "measured_img_s", "predicted_img_s", "error_pct", "note"});
  for (const auto& r : rows) {
    const bool ok = r.error.empty();
    t.add_row({r.study, r.variant, std::to_string(r.workers), std::to_string(r.ps), r.strategy,
               fmt::format("{:.2f}", r.measured), ok ? fmt::format("{:.2f}", r.predicted) : "",
               ok ? fmt::format("{:+.1f}", scenarios::error_pct(r)) : "",
               !ok ? "failed: " + r.error : (r.anchor ? "anchor (not in MAPE)" : "")});
  }
  const auto studies = scenarios::summarize_accuracy(rows);
  Table m({"study", "variant", "rows", "mape_pct", "max_abs_error_pct"});
  for (const auto& s : studies)
    m.add_row({s.study, s.variant, std::to_string(s.rows), fmt::format("{:.1f}", s.mape_pct),
               fmt::format("{:.1f}", s.max_abs_error_pct)});

  std::filesystem::create_directories(a.out);
  const auto csv_path = std::filesystem::path(a.out) / "accuracy.csv";
  {
    std::ofstream csv(csv_path);
    Table c({"study", "variant", "workers", "ps", "strategy", "measured", "predicted", "error_pct", "anchor", "error"});
    for (const auto& r : rows)
      c.add_row({r.study, r.variant, std::to_string(r.workers), std::to_string(r.ps), r.strategy,
                 fmt::format("{:.6g}", r.measured), r.error.empty() ? fmt::format("{:.6g}", r.predicted) : "",
                 r.error.empty() ? fmt::format("{:.3f}", scenarios::error_pct(r)) : "", r.anchor ? "1" : "0", r.error});
    c.print(csv, TextFormat::CSV);
    std::ofstream mcsv(std::filesystem::path(a.out) / "mape.csv");
    m.print(mcsv, TextFormat::CSV);
  }
  if (format == TextFormat::JSON) {
    nlohmann::json j = {{"rows", nlohmann::json::array()}, {"mape", nlohmann::json::array()}};
    for (const auto& r : rows)
      j["rows"].push_back({{"study", r.study}, {"variant", r.variant}, {"workers", r.workers}, {"ps", r.ps},
                           {"strategy", r.strategy}, {"measured", r.measured},
                           {"predicted", r.error.empty() ? nlohmann::json(r.predicted) : nlohmann::json()},
                           {"anchor", r.anchor}, {"error", r.error}});
    for (const auto& s : studies)
      j["mape"].push_back({{"study", s.study}, {"variant", s.variant}, {"rows", s.rows}, {"mape_pct", s.mape_pct},
                           {"max_abs_error_pct", s.max_abs_error_pct}});
    std::cout << j.dump(2) << '\n';
  } else {
    t.print(std::cout, format);
    std::cout << '\n';
    m.print(std::cout, format);
  }
  if (!a.no_plot) {
    const std::string files = scenarios::run_plots(csv_path.string(), a.out);
    if (format == TextFormat::TABLE) std::cout << "\nwrote " << csv_path.string() << "\n" << files;
  }
}

const CommandRegistrar registrar("accuracy", 44, [](CLI::App& root) {
  auto args = std::make_shared<AccuracyArgs>();
  CLI::App* cmd = root.add_subcommand(
      "accuracy", "Benchmark: predict every row of open-measurements.yaml; error per row and MAPE per study");
  cmd->add_option("--out", args->out, "Directory for accuracy.csv, mape.csv and the plots");
  cmd->add_option("--measurements", args->opt.measurements,
                  "Measurement file (default <reference dir>/open-measurements.yaml)");
  cmd->add_option("--study", args->opt.study, "Only this study (a key of the measurement file)");
  cmd->add_option("--max-rows", args->opt.max_rows, "Only the first N rows of each study")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("-j,--jobs", args->opt.jobs, "Rows simulated at once")->check(CLI::Range(1, 1024));
  cmd->add_option("--format", args->format, "table, csv or json");
  cmd->add_flag("--no-anchor", args->no_anchor, "Do not anchor each study at its measured 1-worker row");
  cmd->add_flag("--no-plot", args->no_plot, "Skip the predicted-vs-measured plots");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace dtsim::apps

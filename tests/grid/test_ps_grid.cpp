// The parameter-server grid of issue 16, through the CLI: every strategy x {piz-daint, taiwania2-ib,
// stampede2-skx} x workers {1, 7, 64, 512, 1024} x servers {1, 16, 64}. Every run ends with exit 0
// (a point with the asked workers and servers) or exit 2 with exactly one line on stderr (the
// platform is too small, the option does not apply); never a signal, another exit code or a backtrace
// line. Runs DTSIM_GRID_JOBS (default 2) points at once; ctest label `grid` (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/child.hpp"
#include "sim/training.hpp"
#include "tests/support/run_cli.hpp"

namespace {

struct GridPoint {
  std::string strategy, platform;
  int workers = 0, servers = 0;
  std::string text() const {
    return fmt::format("{} on {}, {} workers, --ps {}", strategy, platform, workers, servers);
  }
};

// A line a backtrace prints: "->  16# main at apps/main.cpp:63", " 3# ...", "Backtrace ...".
bool backtrace_line(const std::string& text) {
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    start = end + 1;
    line.erase(0, std::min(line.size(), line.find_first_not_of(" \t")));
    if (line.starts_with("->") || line.starts_with("Backtrace")) return true;
    const std::size_t hash = line.find("# ");
    if (hash != std::string::npos && hash > 0 && std::all_of(line.begin(), line.begin() + static_cast<long>(hash), ::isdigit))
      return true;
  }
  return false;
}

int grid_jobs() {
  const char* env = std::getenv("DTSIM_GRID_JOBS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 2;
}

}  // namespace

TEST_CASE("grid::PsGrid: every strategy, platform, worker and server count exits 0 or 2 with one line",
          "[.][grid]") {
  // Cheapest first (worker count outermost), so that a stopped run has covered the most points.
  std::vector<GridPoint> points;
  for (int workers : {1, 7, 64, 512, 1024})
    for (const auto& strategy : dtsim::sim::strategy_names())
      for (const char* platform : {"piz-daint", "taiwania2-ib", "stampede2-skx"})
        for (int servers : {1, 16, 64}) points.push_back({strategy, platform, workers, servers});
  std::vector<dtsim::test::CliResult> results(points.size());
  std::vector<double> wall_s(points.size(), 0);
  std::vector<std::string> lost(points.size());
  std::size_t finished = 0;
  const auto start = std::chrono::steady_clock::now();
  dtsim::run_process_pool(
      points.size(), grid_jobs(),
      [&](std::size_t i) {
        const GridPoint& g = points[i];
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = dtsim::test::run_cli({"predict", "--model", "resnet50", "--platform", g.platform, "--batch",
                                             "64", "--strategy", g.strategy, "--workers", std::to_string(g.workers),
                                             "--ps", std::to_string(g.servers), "--format", "json"});
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return nlohmann::json{{"exit", r.exit_code}, {"out", r.out}, {"err", r.err}, {"wall_s", s}}.dump();
      },
      [&](std::size_t i, bool ok, const std::string& text) {
        ++finished;
        if (!ok) {
          lost[i] = text;
        } else {
          const auto j = nlohmann::json::parse(text);
          results[i] = {j["exit"].get<int>(), j["out"].get<std::string>(), j["err"].get<std::string>()};
          wall_s[i] = j["wall_s"].get<double>();
        }
        // One line per point as it ends, so that a long or stopped run shows where the time went.
        const std::string& err = results[i].err;
        std::cout << fmt::format("grid: {}/{} {:6.1f} s exit {} {}{}\n", finished, points.size(), wall_s[i],
                                 ok ? std::to_string(results[i].exit_code) : "?", points[i].text(),
                                 ok && results[i].exit_code != 0 ? ": " + err.substr(0, err.find('\n')) : "")
                  << std::flush;
      },
      [] { return false; });
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int ok = 0, refused = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const GridPoint& g = points[i];
    const auto& r = results[i];
    INFO(g.text() << ": exit " << r.exit_code << ", stderr: " << r.err << lost[i]);
    REQUIRE(lost[i].empty());
    CHECK((r.exit_code == 0 || r.exit_code == 2));
    CHECK_FALSE(backtrace_line(r.err));
    if (r.exit_code == 2) {
      ++refused;
      CHECK(!r.err.empty());
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(r.err.back() == '\n');
    } else if (r.exit_code == 0) {
      ++ok;
      const auto doc = nlohmann::json::parse(r.out, nullptr, false);
      REQUIRE_FALSE(doc.is_discarded());
      const auto& p = doc["points"].at(0);
      CHECK(p["workers"].get<int>() == g.workers);
      CHECK(p["throughput_samples_per_s"].get<double>() > 0);
      // The servers asked for, or fewer where more servers than workers are cut back.
      if (dtsim::sim::uses_servers(dtsim::sim::strategy_by_name(g.strategy))) {
        CHECK(p["ps_servers"].get<int>() >= 1);
        CHECK(p["ps_servers"].get<int>() <= g.servers);
      }
    }
  }
  // The figures CI's budget is checked against (tests/README.md).
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return wall_s[a] > wall_s[b]; });
  std::cout << fmt::format("grid: {} points ({} predicted, {} refused with exit 2) in {:.0f} s with {} jobs; slowest:\n",
                           points.size(), ok, refused, total_s, grid_jobs());
  for (std::size_t k = 0; k < std::min<std::size_t>(5, order.size()); ++k)
    std::cout << fmt::format("  {:.1f} s  {} (exit {})\n", wall_s[order[k]], points[order[k]].text(),
                             results[order[k]].exit_code);
}

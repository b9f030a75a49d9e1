// The configuration header (values, defaults, calibration coverage and its warning), --dump-config
// round trips through predict and sweep, scenario-relative paths and platform labels by name:.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "scenarios/config.hpp"
#include "tests/support/run_cli.hpp"

using dtsim::test::run_cli;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("dtsim_config_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The shipped ntua-vm platform under another name: a user's own platform file.
void write_platform(const fs::path& path, const std::string& name) {
  std::string text = slurp(fs::path(DTSIM_SOURCE_DIR) / "platforms" / "ntua-vm.yaml");
  const std::string from = "name: ntua-vm";
  text.replace(text.find(from), from.size(), "name: " + name);
  std::ofstream(path) << text;
}

// A model no calibration entry covers (odd channel counts and sizes): its compute is all estimated.
void write_uncalibrated_model(const fs::path& path) {
  std::ofstream(path) << "name: odd-net\ninput: {channels: 3, height: 53, width: 53}\nclasses: 11\nlayers:\n"
                         "  - {name: c1, op: conv2d, out_channels: 37, kernel: 5, padding: 2}\n"
                         "  - {name: r1, op: relu}\n"
                         "  - {name: flatten, op: flatten}\n"
                         "  - {name: f1, op: fully_connected, out_channels: classes}\n"
                         "  - {name: loss, op: softmax_loss}\n";
}

// "throughput" of every point of a predict JSON document.
std::vector<double> throughputs(const std::string& json) {
  std::vector<double> out;
  for (const auto& p : nlohmann::json::parse(json)["points"]) out.push_back(p["throughput"].get<double>());
  return out;
}

}  // namespace

TEST_CASE("scenarios::Config: predict's table opens with every assumed value and the coverage", "[scenarios][config]") {
  const auto r = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--workers", "1,2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* needle : {"model lenet5", "platform ntua-vm", "workers 1,2", "batch 32 per worker (default)",
                             "strategy allreduce-auto (default)", "framework none (default)",
                             "fusion 64 MiB (default)", "precision fp32 (default)", "comm mode auto (default)",
                             "calibration: "})
    CHECK(r.out.find(needle) != std::string::npos);
  // Given values are not marked as defaults; the table follows the header, times with units.
  CHECK(r.out.find("model lenet5 (default)") == std::string::npos);
  CHECK(r.out.find("calibration: ") < r.out.find("throughput"));
  CHECK(r.out.find(" ms") != std::string::npos);
  // CSV stays machine-readable: no header, seconds.
  const auto csv = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--format", "csv"});
  CHECK(csv.out.rfind("workers,nodes,ps,throughput,efficiency,iteration_s", 0) == 0);
}

TEST_CASE("scenarios::Config: JSON output carries the header as a config object", "[scenarios][config]") {
  const auto r = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--batch", "16", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  REQUIRE(doc.contains("config"));
  const auto& c = doc["config"];
  CHECK(c["fields"]["batch"] == "16 per worker");
  CHECK(c["fields"]["model"] == "lenet5");
  const auto defaults = c["defaults"].get<std::vector<std::string>>();
  CHECK(std::find(defaults.begin(), defaults.end(), "strategy") != defaults.end());
  CHECK(std::find(defaults.begin(), defaults.end(), "batch") == defaults.end());
  REQUIRE(c["calibration"].size() == 1);
  const double share = c["calibration"][0]["measured_share"].get<double>();
  CHECK(share >= 0);
  CHECK(share <= 1);
}

TEST_CASE("scenarios::Config: less than 90% measured compute gives a warning line", "[scenarios][config]") {
  const auto dir = fresh_dir("coverage");
  write_uncalibrated_model(dir / "odd.yaml");
  const auto r = run_cli({"predict", "--model", (dir / "odd.yaml").string(), "--platform", "ntua-vm"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("calibration: 0% of odd-net's compute") != std::string::npos);
  CHECK(r.out.find("warning: only 0% of odd-net's compute") != std::string::npos);
  // Once: the table's header carries it, so stderr does not repeat it; JSON output gets it on stderr.
  CHECK(r.err.find("warning: only 0%") == std::string::npos);
  const auto j = run_cli({"predict", "--model", (dir / "odd.yaml").string(), "--platform", "ntua-vm", "--format", "json"});
  REQUIRE(j.exit_code == 0);
  CHECK(j.err.find("dtsim: warning: only 0%") != std::string::npos);
  CHECK(j.err.find("dtsim calibrate --model odd-net --batch 32") != std::string::npos);
  // The closed form of the rule: a summary whose coverage is at or above the threshold has no warning.
  dtsim::scenarios::ConfigSummary s;
  s.coverage.push_back({"m", "d", 32, dtsim::scenarios::MIN_MEASURED_COVERAGE, ""});
  CHECK(dtsim::scenarios::coverage_warning(s).empty());
  s.coverage.push_back({"m", "d", 64, 0.43, ""});
  CHECK(dtsim::scenarios::coverage_warning(s).find("only 43% of m's compute (batch 64)") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Config: --dump-config round trips through predict and sweep", "[scenarios][config]") {
  const auto dir = fresh_dir("dump");
  const std::vector<std::string> flags{"--model", "lenet5", "--platform", "ntua-vm", "--workers", "1,3", "--strategy",
                                       "ps", "--ps", "2", "--framework", "pytorch-ddp", "--batch", "24"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"predict"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const auto direct = with({"--format", "json"});
  REQUIRE(direct.exit_code == 0);
  const auto dumped = with({"--dump-config", (dir / "resolved.yaml").string()});
  INFO(dumped.err);
  REQUIRE(dumped.exit_code == 0);
  CHECK(dumped.out.empty());  // writes the file, predicts nothing
  const std::string yaml = slurp(dir / "resolved.yaml");
  for (const char* field : {"strategy: ps", "framework: pytorch-ddp", "fusion_mb: 25", "batch: 24", "precision: fp32",
                            "comm_mode: auto", "# iterations: by strategy (3; asynchronous 6)"})
    CHECK(yaml.find(field) != std::string::npos);
  // Loaded again by predict: the same predictions.
  const auto again = run_cli({"predict", (dir / "resolved.yaml").string(), "--format", "json"});
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(throughputs(again.out) == throughputs(direct.out));
  // And by sweep (one point, no sweep block), from another folder.
  const auto sweep = run_cli({"sweep", (dir / "resolved.yaml").string(), "--out", (dir / "out").string(), "--quiet"}, "/");
  INFO(sweep.err);
  REQUIRE(sweep.exit_code == 0);
  CHECK(sweep.out.find("1 points") != std::string::npos);
  const std::string csv = slurp(dir / "out" / "results.csv");
  CHECK(csv.find(",lenet5,ntua-vm,ps,24,") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Config: a sweep's --dump-config keeps the sweep and its relative paths", "[scenarios][config]") {
  const auto dir = fresh_dir("sweepdump");
  fs::create_directories(dir / "a" / "plat");
  write_platform(dir / "a" / "plat" / "lab.yaml", "lab");
  std::ofstream(dir / "a" / "s.yaml") << "model: lenet5\nplatform: plat/lab.yaml\nworkers: [1, 2]\n"
                                         "sweep:\n  product:\n    batch: [8, 16]\n    platform: [plat/lab.yaml, ntua-vm]\n";
  const auto list = run_cli({"sweep", (dir / "a" / "s.yaml").string(), "--list"});
  REQUIRE(list.exit_code == 0);
  const auto dumped = run_cli({"sweep", (dir / "a" / "s.yaml").string(), "--dump-config", (dir / "d.yaml").string()});
  INFO(dumped.err);
  REQUIRE(dumped.exit_code == 0);
  // The dump lives in another folder: its paths were made absolute, so it expands to the same points.
  const auto relisted = run_cli({"sweep", (dir / "d.yaml").string(), "--list"}, "/");
  INFO(relisted.err);
  REQUIRE(relisted.exit_code == 0);
  auto keys = [](const std::string& listing) {
    std::vector<std::string> out;
    std::istringstream in(listing);
    std::string index, id, key;
    while (in >> index >> id >> key) out.push_back(key.substr(0, key.find("platform=")));
    return out;
  };
  CHECK(keys(relisted.out) == keys(list.out));
  CHECK(keys(list.out).size() == 4);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Config: scenario paths resolve against its folder, results name platforms by name:",
          "[scenarios][config]") {
  const auto dir = fresh_dir("paths");
  fs::create_directories(dir / "cluster");
  write_platform(dir / "cluster" / "lab.yaml", "our-lab");
  write_uncalibrated_model(dir / "cluster" / "odd.yaml");
  std::ofstream(dir / "cluster" / "s.yaml")
      << "description: \"Our lab against NTUA\"\nmodel: odd.yaml\nplatform: lab.yaml\nworkers: [1, 2]\n"
         "iterations: 2\nsweep:\n  product:\n    platform: [lab.yaml, ntua-vm]\n";
  // Run from an unrelated working directory: model and platform are found beside the scenario.
  const auto p = run_cli({"predict", (dir / "cluster" / "s.yaml").string(), "--format", "csv"}, "/");
  INFO(p.err);
  CHECK(p.exit_code == 0);
  const auto s = run_cli({"sweep", (dir / "cluster" / "s.yaml").string(), "--out", (dir / "out").string(), "--quiet"}, "/");
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  CHECK(s.out.find("platform our-lab, ntua-vm (swept)") != std::string::npos);
  // The "platform" column holds names, never the file path.
  std::istringstream csv(slurp(dir / "out" / "results.csv"));
  std::string line;
  std::vector<std::vector<std::string>> cells;
  while (std::getline(csv, line)) {
    cells.emplace_back();
    std::istringstream fields(line);
    std::string cell;
    while (std::getline(fields, cell, ',')) cells.back().push_back(cell);
  }
  REQUIRE(cells.size() == 5);  // header + 2 platforms x 2 worker counts
  const auto column = std::find(cells[0].begin(), cells[0].end(), "platform") - cells[0].begin();
  std::set<std::string> labels;
  for (std::size_t i = 1; i < cells.size(); ++i) labels.insert(cells[i].at(static_cast<std::size_t>(column)));
  CHECK(labels == std::set<std::string>{"our-lab", "ntua-vm"});
  // compare: a platform file on the command line is relative to the working directory.
  const auto c = run_cli({"compare", (dir / "cluster" / "s.yaml").string(), "--platforms", "cluster/lab.yaml,ntua-vm",
                          "--out", (dir / "cmp").string(), "--no-plot"},
                         dir.string());
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(c.out.find("our-lab") != std::string::npos);
  CHECK(c.out.find("calibration: ") != std::string::npos);
  // Its JSON has predict's shape: points and the configuration they ran under.
  const auto cj = run_cli({"compare", (dir / "cluster" / "s.yaml").string(), "--platforms", "cluster/lab.yaml,ntua-vm",
                           "--out", (dir / "cmp").string(), "--no-plot", "--format", "json"},
                          dir.string());
  REQUIRE(cj.exit_code == 0);
  const auto doc = nlohmann::json::parse(cj.out);
  CHECK(doc["points"].size() == 4);
  CHECK(doc["config"]["calibration"].is_array());
  CHECK(doc["config"]["fields"].contains("platform"));
  // Two files with one name: an error naming both, not a merged row.
  write_platform(dir / "cluster" / "lab2.yaml", "our-lab");
  const auto dup = run_cli({"compare", (dir / "cluster" / "s.yaml").string(), "--platforms",
                            "cluster/lab.yaml,cluster/lab2.yaml", "--out", (dir / "cmp2").string()},
                           dir.string());
  CHECK(dup.exit_code == 2);
  CHECK(dup.err.find("both named 'our-lab'") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Config: the header says which collective library runs and where it came from",
          "[scenarios][config]") {
  // The platform names one (piz-daint: NCCL 2.7); the default rule on a CPU platform that names none.
  auto r = run_cli({"predict", "--model", "lenet5", "--platform", "piz-daint", "--workers", "1,2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("collective library nccl-2.7 (platform)") != std::string::npos);
  CHECK(r.out.find("variability device cv 1.48% (GPU default") != std::string::npos);
  r = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--workers", "1,2"});
  CHECK(r.out.find("collective library openmpi-4.0 (default rule (CPU nodes))") != std::string::npos);
  CHECK(r.out.find("variability device cv 2.08% (CPU default") != std::string::npos);
  // The framework beats the platform; the scenario beats the framework; the flag beats the scenario.
  r = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--workers", "2", "--framework", "pytorch-ddp"});
  CHECK(r.out.find("collective library gloo (framework pytorch-ddp)") != std::string::npos);
  const auto dir = fresh_dir("library");
  std::ofstream(dir / "s.yaml") << "name: s\nmodel: lenet5\nplatform: ntua-vm\nworkers: [2]\nframework: pytorch-ddp\n"
                                   "collective_library: mvapich2-2.3\n";
  r = run_cli({"predict", (dir / "s.yaml").string()});
  CHECK(r.out.find("collective library mvapich2-2.3 (scenario)") != std::string::npos);
  r = run_cli({"predict", (dir / "s.yaml").string(), "--collective-library", "none", "--no-variability"});
  CHECK(r.out.find("collective library none (--collective-library)") != std::string::npos);
  CHECK(r.out.find("variability device spread off") != std::string::npos);
  // A bad device_cv is a one-line error naming the file, line and field (exit 2).
  std::ofstream(dir / "bad.yaml") << "name: b\nmodel: lenet5\nplatform: ntua-vm\nvariability: {device_cv: -0.5}\n";
  r = run_cli({"predict", (dir / "bad.yaml").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("bad.yaml:4") != std::string::npos);
  CHECK(r.err.find("device_cv") != std::string::npos);
  fs::remove_all(dir);
}

// `dtsim predict` end to end through the CLI: JSON contract, efficiency, --explain, --trace, and
// exit-2 one-line errors for bad input.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/training.hpp"
#include "tests/support/run_cli.hpp"

using dtsim::test::run_cli;

namespace {
bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }
}  // namespace

TEST_CASE("scenarios::Predict: JSON output follows the contract", "[scenarios][predict]") {
  const auto r = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--workers", "1,4",
                          "--batch", "32", "--strategy", "allreduce-ring", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  REQUIRE(doc["points"].size() == 2);
  for (const auto& p : doc["points"]) {
    // A point is the result record itself (sim::to_json): every field, the same keys as results.jsonl.
    for (const auto& f : dtsim::sim::result_fields()) CHECK(p.contains(f.name));
    CHECK(p.size() == dtsim::sim::result_fields().size());
    CHECK(p["throughput_samples_per_s"].get<double>() > 0);
    CHECK(p["compute_s"].get<double>() > 0);
  }
  CHECK(doc["points"][0]["efficiency"].get<double>() == Approx(1.0));
  CHECK(doc["points"][1]["efficiency"].get<double>() <= 1.0 + 1e-9);
  CHECK(doc["points"][1]["nodes"].get<int>() == 4);  // one P100 per Piz Daint node
}

TEST_CASE("scenarios::Predict: anchor fixes the single-worker throughput", "[scenarios][predict]") {
  const auto r = run_cli({"predict", "--model", "inception_v3", "--platform", "piz-daint", "--workers", "1",
                          "--batch", "64", "--strategy", "ps", "--ps", "1", "--anchor", "138.23", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["points"][0]["throughput_samples_per_s"].get<double>() == Approx(138.23).epsilon(0.01));
}

TEST_CASE("scenarios::Predict: --explain and --trace", "[scenarios][predict]") {
  const std::string trace = "/tmp/dtsim_test_predict_trace.json";
  const auto r = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--workers", "4", "--batch",
                          "32", "--strategy", "ps", "--ps", "1", "--explain", "--trace", trace});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // The explanation is a paragraph under the table, not a column; no line wraps past 100 characters.
  CHECK(r.out.find("bottleneck") == std::string::npos);
  CHECK(r.out.find("\n\n4 workers, worker 0's ") != std::string::npos);
  CHECK(r.out.find("Busiest resource: ") != std::string::npos);
  std::istringstream lines(r.out.substr(r.out.find("\n\n")));
  for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 100);
  std::ifstream in(trace);
  REQUIRE(in);
  const auto doc = nlohmann::json::parse(in);
  CHECK(doc["traceEvents"].size() > 10);
  std::remove(trace.c_str());
}

TEST_CASE("scenarios::Predict: --trace-iterations traces the last N iterations", "[scenarios][predict]") {
  const std::string trace = "/tmp/dtsim_test_predict_trace_n.json";
  const auto r = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--workers", "2", "--batch",
                          "32", "--trace", trace, "--trace-iterations", "3"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(trace);
  REQUIRE(in);
  const auto doc = nlohmann::json::parse(in);
  int iterations = 0;
  for (const auto& e : doc["traceEvents"])
    if (e.value("cat", "") == "iteration" && e["tid"] == 0) ++iterations;
  CHECK(iterations == 3);  // worker 0's last three iterations (4 simulated: 1 warm-up + 3)
  std::remove(trace.c_str());
  const auto bad = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--workers", "2", "--trace",
                            trace, "--trace-iterations", "5", "--iterations", "3"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--trace-iterations") != std::string::npos);
  const auto no_trace = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--trace-iterations", "2"});
  CHECK(no_trace.exit_code == 2);
}

TEST_CASE("scenarios::Predict: bad input exits 2 with one line", "[scenarios][predict]") {
  const std::vector<std::string> base{"predict", "--model", "resnet50", "--platform", "piz-daint", "--batch", "32"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  struct Case {
    std::vector<std::string> extra;
    const char* needle;
  };
  const std::vector<Case> cases{
      {{"--workers", "2", "--strategy", "allreduce-magic"}, "unknown strategy"},
      {{"--workers", "100000"}, "--workers"},
      {{"--workers", "2", "--batch", "0"}, "--batch"},
      {{"--workers", "1,2,4", "--strategy", "ps", "--ps", "1,2"}, "--ps"},
      {{"--workers", "0"}, "--workers"},
      {{"--workers", "2", "--format", "xml"}, "--format"},
      {{"--workers", "2", "--fusion-mb", "-3"}, "--fusion-mb"},
  };
  for (const auto& c : cases) {
    const auto r = with(c.extra);
    INFO(c.needle << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK(r.err.find(c.needle) != std::string::npos);
  }
  const auto unknown_model = run_cli({"predict", "--model", "no-such-net", "--platform", "piz-daint", "--workers", "1"});
  CHECK(unknown_model.exit_code == 2);
  CHECK(one_line(unknown_model.err));
}

namespace {
std::filesystem::path scenario_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("dtsim_predict_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}
}  // namespace

TEST_CASE("scenarios::Predict: errors found after loading name the scenario file, line and field",
          "[scenarios][predict]") {
  const auto dir = scenario_dir("where");
  struct Case {
    const char* text;
    const char* where;
    const char* what;
  };
  const std::vector<Case> cases{
      {"model: no-such-net\nplatform: ntua-vm\n", "s.yaml:1: field 'model'", "unknown model 'no-such-net'"},
      {"model: lenet5\nplatform: no-such-cluster\n", "s.yaml:2: field 'platform'", "unknown platform"},
      {"model: lenet5\nplatform: ntua-vm\nworkers: [4096]\n", "s.yaml:3: field 'workers'", "platform 'ntua-vm' has"},
      {"model: lenet5\nplatform: ntua-vm\ninput_h: 100000\n", "s.yaml:3:", "'input_h' must be in 0..32768"},
      {"model: empty.yaml\nplatform: ntua-vm\n", "s.yaml:1: field 'model'", "empty.yaml:1: model: field 'name' must not be empty"},
      {"model: lenet5\nplatform: ntua-vm\nanchor: 1e300\n", "s.yaml:3: field 'anchor'", "iteration under"},
      {"model: \"net\\nrm -rf /\"\nplatform: ntua-vm\n", "s.yaml:1: field 'model'", "net\\nrm -rf /"},
  };
  std::ofstream(dir / "empty.yaml") << "name: \"\"\ninput: {channels: 1, height: 28, width: 28}\nlayers:\n"
                                       "  - {name: r, op: relu}\n";
  for (const auto& c : cases) {
    std::ofstream(dir / "s.yaml") << c.text;
    const auto r = run_cli({"predict", (dir / "s.yaml").string()});
    INFO(c.text << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK(r.err.find(c.where) != std::string::npos);
    CHECK(r.err.find(c.what) != std::string::npos);
    CHECK(r.err.find("--workers") == std::string::npos);  // never a flag that was not given
  }
  // The same value given as a flag is blamed on the flag.
  std::ofstream(dir / "s.yaml") << "model: lenet5\nplatform: ntua-vm\nworkers: [1]\n";
  const auto flag = run_cli({"predict", (dir / "s.yaml").string(), "--workers", "4096"});
  CHECK(flag.exit_code == 2);
  CHECK(flag.err.find("--workers") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("scenarios::Predict: absurd --anchor and over-long names exit 2 with one line", "[scenarios][predict]") {
  const std::vector<std::string> base{"predict", "--platform", "ntua-vm", "--model", "lenet5", "--workers", "1"};
  auto anchored = base;
  anchored.insert(anchored.end(), {"--anchor", "1e300"});
  const auto a = run_cli(anchored);
  CHECK(a.exit_code == 2);
  CHECK(one_line(a.err));
  CHECK(a.err.find("--anchor") != std::string::npos);
  const std::string long_name(300, 'x');
  for (const bool long_model : {true, false}) {
    const std::vector<std::string> args{"predict", "--model", long_model ? long_name : "lenet5", "--platform",
                                        long_model ? "ntua-vm" : long_name, "--workers", "1"};
    const char* flag = long_model ? "--model" : "--platform";
    const auto r = run_cli(args);
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK(r.err.find("unknown") != std::string::npos);
    CHECK(r.err.find("filesystem error") == std::string::npos);
  }
}

TEST_CASE("scenarios::Predict: the efficiency baseline does not depend on whether 1 worker is listed",
          "[scenarios][predict]") {
  // The 1-worker baseline uses the point's server count: --workers 2 --ps 64 used to report 1.102
  // against a 1-server baseline, while --workers 1,2 --ps 64 reported 1.000 for the same point.
  auto efficiency_of_2 = [](const std::string& workers) {
    const auto r = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--batch", "32", "--strategy",
                            "ps", "--ps", "64", "--workers", workers, "--format", "json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);
    return doc["points"].back()["efficiency"].get<double>();
  };
  const auto note = run_cli({"predict", "--model", "lenet5", "--platform", "ntua-vm", "--batch", "32", "--strategy",
                             "ps", "--ps", "64", "--workers", "2"});
  CHECK(note.err.find("note: 64 parameter servers for 2 workers") != std::string::npos);  // explained, not silent
  const double alone = efficiency_of_2("2");
  const double listed = efficiency_of_2("1,2");
  CHECK(alone == Approx(listed).epsilon(1e-9));
  CHECK(alone <= 1.0 + 1e-9);
}

TEST_CASE("scenarios::Predict: model paths in a scenario are relative to the scenario's folder", "[scenarios][predict]") {
  const auto dir = scenario_dir("relative");
  const auto r = run_cli({"predict", std::string(DTSIM_SOURCE_DIR) + "/scenarios/prace-dgx1-gan.yaml", "--workers",
                          "1", "--format", "json"},
                         dir.string());
  INFO(r.err);
  CHECK(r.exit_code == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("scenarios::Predict: plot --timeline draws a trace as PNG and SVG", "[scenarios][predict][plot]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dtsim_timeline_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string trace = (dir / "trace.json").string();
  auto r = run_cli({"predict", "--model", "resnet50", "--platform", "piz-daint", "--workers", "4", "--strategy", "ps",
                    "--ps", "2", "--trace", trace, "--trace-iterations", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_cli({"plot", "--timeline", trace, "--out", (dir / "plots").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path png = dir / "plots" / "timeline.png";
  CHECK(r.out.find(png.string()) != std::string::npos);
  REQUIRE(fs::is_regular_file(png));
  CHECK(fs::file_size(png) > 10'000);
  std::ifstream in(png, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof magic);
  CHECK(std::string(magic + 1, 3) == "PNG");
  CHECK(fs::is_regular_file(dir / "plots" / "timeline.svg"));
  // A missing trace and a file that is not a trace are bad input (exit 2, one line naming the file).
  r = run_cli({"plot", "--timeline", (dir / "missing.json").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("missing.json") != std::string::npos);
  std::ofstream(dir / "bad.json") << "{\"not\": \"a trace\"}";
  r = run_cli({"plot", "--timeline", (dir / "bad.json").string(), "--out", (dir / "plots").string()});
  CHECK(r.exit_code == 2);
  r = run_cli({"plot"});
  CHECK(r.exit_code == 2);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Predict: intel-caffe-mlsl gives MLSL's endpoint servers their cores across nodes",
          "[scenarios][predict][frameworks]") {
  // Stampede2 SKX: 2 x 24 cores, 2 processes per node = 24 cores each. Intel Caffe's launcher starts
  // 2 MLSL servers per process on runs across nodes and gives OpenMP the other 22 cores.
  const auto compute = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args{"predict", "--model", "resnet50", "--platform", "stampede2-skx", "--batch", "16",
                                  "--workers-per-node", "2", "--workers", "1,2,4", "--strategy", "allreduce-ring",
                                  "--no-variability", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<double> out;
    const auto doc = nlohmann::json::parse(r.out);
    for (const auto& p : doc["points"]) out.push_back(p["compute_s"].get<double>());
    REQUIRE(out.size() == 3);
    return out;
  };
  const auto all_cores = compute({"--framework", "none"});
  const auto cores_22 = compute({"--framework", "none", "--threads", "22"});
  const auto mlsl = compute({"--framework", "intel-caffe-mlsl"});
  // One node (1 and 2 workers) starts no servers: every core computes.
  CHECK(mlsl[0] == Approx(all_cores[0]).epsilon(1e-12));
  CHECK(mlsl[1] == Approx(all_cores[1]).epsilon(1e-12));
  // Two nodes: the compute of 22 threads, slower than 24.
  CHECK(mlsl[2] == Approx(cores_22[2]).epsilon(1e-12));
  CHECK(mlsl[2] > all_cores[2] * 1.01);

  // An anchor corrects the calibration, not the cores: the multi-node compute keeps its ratio.
  const auto anchored = compute({"--framework", "intel-caffe-mlsl", "--anchor", "50"});
  CHECK(anchored[2] / anchored[0] == Approx(mlsl[2] / mlsl[0]).epsilon(1e-9));

  // Threads given explicitly must leave the servers their cores, but only when a point spans nodes.
  const auto too_many = run_cli({"predict", "--model", "resnet50", "--platform", "stampede2-skx", "--batch", "16",
                                 "--workers-per-node", "2", "--workers", "4", "--framework", "intel-caffe-mlsl",
                                 "--threads", "24"});
  CHECK(too_many.exit_code == 2);
  CHECK(one_line(too_many.err));
  CHECK(too_many.err.find("--threads: 24 threads per process") != std::string::npos);
  CHECK(too_many.err.find("expected <= 22") != std::string::npos);
  const auto one_node = run_cli({"predict", "--model", "resnet50", "--platform", "stampede2-skx", "--batch", "16",
                                 "--workers-per-node", "2", "--workers", "2", "--framework", "intel-caffe-mlsl",
                                 "--threads", "24"});
  CHECK(one_node.exit_code == 0);
}

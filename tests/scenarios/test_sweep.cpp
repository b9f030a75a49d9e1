// Sweep engine tests with an injected point function: expansion, keys, the durable store, resuming
// after SIGKILL and SIGINT, error records. (The CLI and MPI paths are in test_sweep_cli.cpp.)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/errors.hpp"
#include "scenarios/sweep.hpp"

namespace fs = std::filesystem;
using namespace dtsim::scenarios;

namespace {

const dtsim::yaml::Origin ORIGIN{"test.yaml"};

YAML::Node scenario_with(const std::string& sweep) {
  return YAML::Load("model: resnet50\nplatform: piz-daint\nworkers: 1\nbatch: 32\n"
                    "variability: {jitter_cv: 0.1}\n" + sweep);
}

std::vector<SweepPoint> expand(const std::string& sweep) {
  const YAML::Node n = scenario_with(sweep);
  return expand_sweep(n, parse_sweep(n["sweep"], ORIGIN), ORIGIN);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("dtsim_sweep_{}_{}", name, ::getpid());
  fs::remove_all(d);
  return d;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::size_t count_lines(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += line.empty() ? 0 : 1;
  return n;
}

// A fake point: throughput = workers x batch, and a marker line in `log` per call (appended by the
// worker process, so the parent can count which points actually ran).
PointFunction fake_point(const fs::path& log, int sleep_ms = 0) {
  return [log, sleep_ms](const SweepPoint& p, const dtsim::yaml::Origin&) {
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    {
      std::ofstream(log, std::ios::app) << p.key << '\n';
    }
    if (p.node["batch"].as<int>() < 0) throw dtsim::InputError("batch must be > 0");
    PointOutcome o;
    o.labels["model"] = p.node["model"].as<std::string>();
    dtsim::sim::PointResult r;
    r.workers = p.node["workers"].as<int>();
    r.throughput = r.workers * p.node["batch"].as<double>();
    r.efficiency = 1.0;
    o.rows.push_back(r);
    return o;
  };
}

SweepOptions options_for(const fs::path& dir, int jobs = 1) {
  SweepOptions o;
  o.out_dir = dir.string();
  o.jobs = jobs;
  o.progress = false;
  o.allow_mpi = false;
  return o;
}

}  // namespace

TEST_CASE("scenarios::Sweep: product crosses axes, last axis fastest, with canonical keys") {
  const auto pts = expand("sweep: {product: {workers: [1, 2, 4], batch: [32, 64]}}");
  REQUIRE(pts.size() == 6);
  CHECK(pts[0].key == "workers=1;batch=32");
  CHECK(pts[1].key == "workers=1;batch=64");
  CHECK(pts[5].key == "workers=4;batch=64");
  CHECK(pts[3].node["workers"].as<int>() == 2);
  CHECK(pts[3].node["batch"].as<int>() == 64);
  CHECK_FALSE(pts[3].node["sweep"]);
  for (std::size_t i = 0; i < pts.size(); ++i) CHECK(pts[i].index == i);
}

TEST_CASE("scenarios::Sweep: zip groups advance together and cross with the product") {
  const auto pts = expand("sweep:\n  product: {data: [synthetic, real]}\n  zip: {workers: [1, 8, 64], ps: [1, 2, 40]}\n");
  REQUIRE(pts.size() == 6);
  CHECK(pts[2].key == "data=synthetic;workers=64;ps=40");
  CHECK(pts[4].node["ps"].as<int>() == 2);
  CHECK(pts[4].node["workers"].as<int>() == 8);
  CHECK(pts[4].node["data"].as<std::string>() == "real");
}

TEST_CASE("scenarios::Sweep: dotted fields edit nested maps without touching the base scenario") {
  const YAML::Node base = scenario_with("sweep: {product: {variability.jitter_cv: [0, 0.3], ps_options.count: [2]}}");
  const auto pts = expand_sweep(base, parse_sweep(base["sweep"], ORIGIN), ORIGIN);
  REQUIRE(pts.size() == 2);
  CHECK(pts[1].node["variability"]["jitter_cv"].as<double>() == Approx(0.3));
  CHECK(pts[1].node["ps_options"]["count"].as<int>() == 2);
  CHECK(base["variability"]["jitter_cv"].as<double>() == Approx(0.1));
  CHECK_FALSE(base["ps_options"]);
  CHECK(base["sweep"]);
}

TEST_CASE("scenarios::Sweep: ids are stable, distinct per point, and follow base-scenario edits") {
  const auto a = expand("sweep: {product: {workers: [1, 2]}}");
  const auto b = expand("sweep: {product: {workers: [1, 2]}}");
  CHECK(a[0].id == b[0].id);
  CHECK(a[0].id != a[1].id);
  CHECK(a[0].id.size() == 16);
  YAML::Node other = scenario_with("sweep: {product: {workers: [1, 2]}}");
  other["batch"] = 64;
  const auto c = expand_sweep(other, parse_sweep(other["sweep"], ORIGIN), ORIGIN);
  CHECK(c[0].id != a[0].id);
  CHECK(canonical_text(YAML::Load("{b: 1, a: [x, {d: 2, c: 3}]}")) == "{a:[x,{c:3,d:2}],b:1}");
}

TEST_CASE("scenarios::Sweep: no sweep block gives the scenario itself as one point") {
  const YAML::Node n = scenario_with("");
  const auto pts = expand_sweep(n, parse_sweep(n["sweep"], ORIGIN), ORIGIN);
  REQUIRE(pts.size() == 1);
  CHECK(pts[0].key == "base");
}

TEST_CASE("scenarios::Sweep: bad sweep blocks are input errors naming the field") {
  auto bad = [](const std::string& s) {
    const YAML::Node n = scenario_with(s);
    return parse_sweep(n["sweep"], ORIGIN);
  };
  CHECK_THROWS_WITH(bad("sweep: {zip: {workers: [1, 2], ps: [1]}}"), Catch::Contains("equal lengths"));
  CHECK_THROWS_WITH(bad("sweep: {product: {workers: 4}}"), Catch::Contains("'workers' must be a non-empty list"));
  CHECK_THROWS_WITH(bad("sweep: {product: {workers: []}}"), Catch::Contains("non-empty list"));
  CHECK_THROWS_WITH(bad("sweep: {prodcut: {workers: [1]}}"), Catch::Contains("unknown key 'prodcut'"));
  CHECK_THROWS_WITH(bad("sweep: {product: {workers: [1]}, zip: {workers: [2]}}"), Catch::Contains("swept twice"));
  CHECK_THROWS_WITH(bad("sweep: {}"), Catch::Contains("needs 'product'"));
  CHECK_THROWS_WITH(bad("sweep: {product: {a..b: [1]}}"), Catch::Contains("dotted field path"));
  CHECK_NOTHROW(bad("sweep: {product: {workers: [1]}}"));
  const YAML::Node n = scenario_with("sweep: {product: {model.depth: [1]}}");
  CHECK_THROWS_WITH(expand_sweep(n, parse_sweep(n["sweep"], ORIGIN), ORIGIN), Catch::Contains("not a map"));
}

TEST_CASE("scenarios::Sweep: a run writes one JSON line and CSV row per point, and a re-run skips them all") {
  const fs::path dir = fresh_dir("rerun");
  const fs::path log = dir.string() + ".log";
  fs::remove(log);
  const auto pts = expand("sweep: {product: {workers: [1, 2, 4, 8], batch: [16, 32]}}");
  auto s = run_sweep(pts, ORIGIN, options_for(dir, 2), fake_point(log));
  CHECK(s.total == 8);
  CHECK(s.ran == 8);
  CHECK(s.skipped == 0);
  CHECK_FALSE(s.interrupted);
  const auto recs = read_jsonl(dir / "results.jsonl");
  REQUIRE(recs.size() == 8);
  for (std::size_t i = 0; i < recs.size(); ++i) {
    CHECK(recs[i]["index"] == i);  // rewritten in point order at the end
    CHECK(recs[i]["status"] == "ok");
  }
  CHECK(recs[7]["rows"][0]["throughput_samples_per_s"].get<double>() == Approx(8 * 32));
  CHECK(count_lines(dir / "results.csv") == 9);
  std::ifstream csv(dir / "results.csv");
  std::string header;
  std::getline(csv, header);
  CHECK(header.rfind("index,key,sweep.workers,sweep.batch,model,", 0) == 0);
  CHECK(count_lines(log) == 8);

  s = run_sweep(pts, ORIGIN, options_for(dir, 2), fake_point(log));
  CHECK(s.skipped == 8);
  CHECK(s.ran == 0);
  CHECK(count_lines(log) == 8);
  fs::remove_all(dir);
  fs::remove(log);
}

TEST_CASE("scenarios::Sweep: a recorded point whose inputs changed is run again; the others are kept") {
  const fs::path dir = fresh_dir("inputs");
  const fs::path log = dir.string() + ".log";
  fs::remove(log);
  auto pts = expand("sweep: {product: {workers: [1, 2, 4]}}");
  for (auto& p : pts) p.inputs = "build-a";
  auto s = run_sweep(pts, ORIGIN, options_for(dir), fake_point(log));
  CHECK(s.ran == 3);
  CHECK(s.stale == 0);
  pts[1].inputs = "build-b";  // e.g. its platform file was edited, or another dtsim build resumes
  s = run_sweep(pts, ORIGIN, options_for(dir), fake_point(log));
  CHECK(s.skipped == 2);
  CHECK(s.stale == 1);
  CHECK(s.ran == 1);
  CHECK(count_lines(log) == 4);
  const auto recs = read_jsonl(dir / "results.jsonl");
  REQUIRE(recs.size() == 3);  // one record per point: the new one replaced the stale one
  CHECK(recs[1]["inputs"] == "build-b");
  CHECK(recs[0]["inputs"] == "build-a");
  // A stale point that now fails shows its error, not the old figures.
  pts[2].inputs = "build-c";
  const PointFunction failing = [](const SweepPoint&, const dtsim::yaml::Origin&) -> PointOutcome {
    throw dtsim::InputError("the edited platform file is invalid");
  };
  s = run_sweep(pts, ORIGIN, options_for(dir), failing);
  CHECK(s.stale == 1);
  CHECK(s.failed == 1);
  const auto after = read_jsonl(dir / "results.jsonl");
  REQUIRE(after.size() == 3);
  CHECK(after[2]["status"] == "error");
  CHECK(after[2]["inputs"] == "build-c");
  // Records written before inputs were stamped (no "inputs") are stale too.
  for (auto& p : pts) p.inputs.clear();
  const fs::path old_dir = fresh_dir("inputs-old");
  s = run_sweep(pts, ORIGIN, options_for(old_dir), fake_point(log));
  for (auto& p : pts) p.inputs = "build-a";
  s = run_sweep(pts, ORIGIN, options_for(old_dir), fake_point(log));
  CHECK(s.stale == 3);
  CHECK(s.ran == 3);
  fs::remove_all(dir);
  fs::remove_all(old_dir);
  fs::remove(log);
}

TEST_CASE("scenarios::Sweep: failed points are recorded with their message and retried only on request") {
  const fs::path dir = fresh_dir("errors");
  const fs::path log = dir.string() + ".log";
  fs::remove(log);
  const auto pts = expand("sweep: {product: {batch: [32, -1]}}");
  auto s = run_sweep(pts, ORIGIN, options_for(dir), fake_point(log));
  CHECK(s.failed == 1);
  auto recs = read_jsonl(dir / "results.jsonl");
  REQUIRE(recs.size() == 2);
  CHECK(recs[1]["status"] == "error");
  CHECK(recs[1]["error"].get<std::string>().find("batch must be > 0") != std::string::npos);
  s = run_sweep(pts, ORIGIN, options_for(dir), fake_point(log));
  CHECK(s.ran == 0);
  auto retry = options_for(dir);
  retry.retry_failed = true;
  s = run_sweep(pts, ORIGIN, retry, fake_point(log));
  CHECK(s.ran == 1);
  CHECK(read_jsonl(dir / "results.jsonl").size() == 2);  // one record per point, not duplicates
  fs::remove_all(dir);
  fs::remove(log);
}

TEST_CASE("scenarios::Sweep: a torn last line (killed mid-write) is dropped and its point re-run") {
  const fs::path dir = fresh_dir("torn");
  const fs::path log = dir.string() + ".log";
  fs::remove(log);
  const auto pts = expand("sweep: {product: {workers: [1, 2, 3]}}");
  run_sweep(pts, ORIGIN, options_for(dir), fake_point(log));
  // Keep two records and half of the third.
  auto recs = read_jsonl(dir / "results.jsonl");
  {
    std::ofstream out(dir / "results.jsonl", std::ios::trunc);
    out << recs[0].dump() << '\n' << recs[1].dump() << '\n' << recs[2].dump().substr(0, 20);
  }
  const auto s = run_sweep(pts, ORIGIN, options_for(dir), fake_point(log));
  CHECK(s.skipped == 2);
  CHECK(s.ran == 1);
  CHECK(read_jsonl(dir / "results.jsonl").size() == 3);
  CHECK(count_lines(dir / "results.csv") == 4);
  fs::remove_all(dir);
  fs::remove(log);
}

namespace {
// Runs a slow sweep in a child process, sends `sig` once `after` points are on disk, waits for the
// child and returns how many records the results file held when it stopped.
std::size_t interrupt_sweep(const std::vector<SweepPoint>& pts, const fs::path& dir, const fs::path& log, int sig,
                            std::size_t after) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      run_sweep(pts, ORIGIN, options_for(dir, 2), fake_point(log, 150));
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (count_lines(dir / "results.jsonl") < after && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return count_lines(dir / "results.jsonl");
}
}  // namespace

TEST_CASE("scenarios::Sweep: killed midway (SIGKILL), a re-run runs only the missing points") {
  const fs::path dir = fresh_dir("kill");
  const fs::path log = dir.string() + ".log";
  fs::remove(log);
  const auto pts = expand("sweep: {product: {workers: [1, 2, 4, 8, 16, 32], batch: [16, 32]}}");
  const std::size_t kept = interrupt_sweep(pts, dir, log, SIGKILL, 3);
  REQUIRE(kept >= 3);
  REQUIRE(kept < pts.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // orphaned workers die (PDEATHSIG)
  fs::remove(log);
  const auto s = run_sweep(pts, ORIGIN, options_for(dir, 2), fake_point(log));
  CHECK(s.skipped == kept);
  CHECK(s.ran == pts.size() - kept);
  CHECK(count_lines(log) == pts.size() - kept);
  const auto recs = read_jsonl(dir / "results.jsonl");
  REQUIRE(recs.size() == pts.size());
  for (std::size_t i = 0; i < recs.size(); ++i) CHECK(recs[i]["key"] == pts[i].key);
  fs::remove_all(dir);
  fs::remove(log);
}

TEST_CASE("scenarios::Sweep: SIGINT stops cleanly, keeps finished points, and a re-run completes") {
  const fs::path dir = fresh_dir("sigint");
  const fs::path log = dir.string() + ".log";
  fs::remove(log);
  const auto pts = expand("sweep: {product: {workers: [1, 2, 4, 8, 16, 32, 64, 128]}}");
  const std::size_t kept = interrupt_sweep(pts, dir, log, SIGINT, 2);
  REQUIRE(kept >= 2);
  REQUIRE(kept < pts.size());
  // Every record on disk is whole, and the CSV agrees with it.
  CHECK(read_jsonl(dir / "results.jsonl").size() == kept);
  CHECK(count_lines(dir / "results.csv") == kept + 1);
  CHECK_FALSE(fs::exists(dir / "results.csv.tmp"));
  CHECK_FALSE(fs::exists(dir / "results.jsonl.tmp"));
  fs::remove(log);
  const auto s = run_sweep(pts, ORIGIN, options_for(dir, 3), fake_point(log));
  CHECK(s.ran == pts.size() - kept);
  CHECK(read_jsonl(dir / "results.jsonl").size() == pts.size());
  fs::remove_all(dir);
  fs::remove(log);
}

TEST_CASE("scenarios::Sweep: a point's inputs stamp follows the CPU thread-scaling table it is predicted with") {
  const fs::path dir = fresh_dir("stamp_scaling");
  fs::create_directories(dir);
  const fs::path a = dir / "a.json", b = dir / "b.json";
  std::ofstream(a) << R"({"backend": "libtorch", "threads": [1, 4], "classes": {"conv": [1, 1.2]}, "shapes": {}})";
  std::ofstream(b) << R"({"backend": "libtorch", "threads": [1, 4], "classes": {"conv": [1, 1.3]}, "shapes": {}})";
  const auto stamped = [](const fs::path& table) {
    ::setenv("DTSIM_THREAD_SCALING", table.c_str(), 1);
    auto pts = expand("sweep:\n  product:\n    batch: [32]\n");
    stamp_points(pts, ORIGIN);
    return pts.at(0).inputs;
  };
  const std::string with_a = stamped(a), with_b = stamped(b);
  ::unsetenv("DTSIM_THREAD_SCALING");
  CHECK_FALSE(with_a.empty());
  CHECK(with_a != with_b);
  CHECK(stamped(a) == with_a);
  ::unsetenv("DTSIM_THREAD_SCALING");
  fs::remove_all(dir);
}

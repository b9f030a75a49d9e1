// `dtsim sweep`, `dtsim compare`, `dtsim plot` and `dtsim accuracy` through the CLI: help, bad input,
// a real two-point sweep, its re-run, and `mpirun -np 2` giving the same results as --jobs 1.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/run_cli.hpp"

namespace fs = std::filesystem;
using dtsim::test::run_cli;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("dtsim_sweepcli_" + name + "_" + std::to_string(::getpid()));
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

// A small, fast sweep: LeNet-5 on the 3-VM platform, 2 strategies x workers {1, 2}.
fs::path write_small_scenario(const fs::path& dir) {
  const fs::path p = dir / "small.yaml";
  std::ofstream(p) << "model: lenet5\nplatform: ntua-vm\nbatch: 42\nworkers: [1, 2]\nps: 1\niterations: 2\n"
                      "sweep: {product: {strategy: [allreduce-ring, ps]}}\n";
  return p;
}

// results.jsonl without the host-time field (wall_s differs run to run), one record per line.
std::string records_without_wall(const fs::path& jsonl) {
  std::istringstream in(slurp(jsonl));
  std::string line, out;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (auto& r : j["rows"]) r.erase("wall_s");
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("scenarios::SweepCli: every subcommand has --help") {
  for (const char* c : {"sweep", "compare", "plot", "accuracy"}) {
    const auto r = run_cli({c, "--help"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("--out") != std::string::npos);
  }
}

TEST_CASE("scenarios::SweepCli: bad input exits 2 with one line naming the problem") {
  const fs::path dir = temp_dir("bad");
  std::ofstream(dir / "zip.yaml") << "model: lenet5\nplatform: ntua-vm\nsweep: {zip: {workers: [1, 2], ps: [1]}}\n";
  auto r = run_cli({"sweep", (dir / "zip.yaml").string(), "--out", (dir / "o").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("equal lengths") != std::string::npos);
  std::ofstream(dir / "field.yaml") << "model: lenet5\nplatform: ntua-vm\nsweep: {product: {wrokers: [1, 2]}}\n";
  r = run_cli({"sweep", (dir / "field.yaml").string(), "--out", (dir / "o").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("wrokers") != std::string::npos);
  r = run_cli({"sweep", (dir / "missing.yaml").string()});
  CHECK(r.exit_code == 2);
  r = run_cli({"sweep", (dir / "zip.yaml").string(), "--jobs", "0"});
  CHECK(r.exit_code == 2);
  r = run_cli({"compare", (dir / "field.yaml").string(), "--platforms", "ntua-vm,,x"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--platforms") != std::string::npos);
  r = run_cli({"plot", (dir / "nothing").string()});
  CHECK(r.exit_code == 2);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::SweepCli: a real sweep writes CSV and JSON lines, and a re-run skips every point") {
  const fs::path dir = temp_dir("real");
  const fs::path scen = write_small_scenario(dir);
  auto r = run_cli({"sweep", scen.string(), "--jobs", "2", "--out", (dir / "o").string(), "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("2 points (0 already done, 2 run now") != std::string::npos);
  const std::string csv = slurp(dir / "o" / "results.csv");
  CHECK(csv.find("sweep.strategy") != std::string::npos);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);  // header + 2 points x 2 worker counts
  r = run_cli({"sweep", scen.string(), "--out", (dir / "o").string(), "--quiet"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("2 points (2 already done, 0 run now") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::SweepCli: a resumed sweep recomputes the points whose platform file was edited since") {
  const fs::path dir = temp_dir("stale");
  fs::copy_file(fs::path(DTSIM_SOURCE_DIR) / "platforms" / "ntua-vm.yaml", dir / "vm.yaml");
  const fs::path scen = dir / "s.yaml";
  std::ofstream(scen) << "model: lenet5\nplatform: " << (dir / "vm.yaml").string()
                      << "\nbatch: 42\nworkers: [1, 2]\niterations: 2\nsweep: {product: {batch: [21, 42]}}\n";
  auto r = run_cli({"sweep", scen.string(), "--out", (dir / "o").string(), "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_cli({"sweep", scen.string(), "--out", (dir / "o").string(), "--quiet"});
  CHECK(r.out.find("2 points (2 already done, 0 run now, 0 with errors") != std::string::npos);
  // An edit of the platform file (even a comment: the file is hashed, not its meaning) makes both
  // recorded points stale; they are computed again, not mixed with the new file's figures.
  std::ofstream(dir / "vm.yaml", std::ios::app) << "# edited\n";
  r = run_cli({"sweep", scen.string(), "--out", (dir / "o").string()});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("2 points (0 already done, 2 run now, 2 of them recorded from other inputs") != std::string::npos);
  CHECK(r.err.find("2 points recorded in") != std::string::npos);
  const std::string jsonl = slurp(dir / "o" / "results.jsonl");
  CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') == 2);  // one record per point, the new ones
  CHECK(jsonl.find("\"inputs\"") != std::string::npos);
  r = run_cli({"sweep", scen.string(), "--out", (dir / "o").string(), "--quiet"});
  CHECK(r.out.find("2 points (2 already done, 0 run now, 0 with errors") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::SweepCli: mpirun -np 2 gives the same results as --jobs 1") {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    WARN("mpirun not found: MPI sweep not checked");
    return;
  }
  const fs::path dir = temp_dir("mpi");
  const fs::path scen = write_small_scenario(dir);
  auto r = run_cli({"sweep", scen.string(), "--jobs", "1", "--out", (dir / "serial").string(), "--quiet"});
  REQUIRE(r.exit_code == 0);
  const std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                          "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun -np 2 -x OMP_NUM_THREADS=1 '" DTSIM_BINARY
                          "' sweep '" + scen.string() + "' --quiet --out '" + (dir / "mpi").string() + "' > '" +
                          (dir / "mpi.log").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(slurp(dir / "mpi.log"));
  REQUIRE(status == 0);
  CHECK(slurp(dir / "mpi.log").find("on 2 MPI ranks") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "mpi" / "parts"));  // rank 0 merged the other rank's part file
  CHECK(records_without_wall(dir / "mpi" / "results.jsonl") == records_without_wall(dir / "serial" / "results.jsonl"));
  CHECK(slurp(dir / "mpi" / "results.csv").size() > 0);
  fs::remove_all(dir);
}

namespace {
bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }
}  // namespace

TEST_CASE("scenarios::SweepCli: hostile YAML exits 2 with one line on every path that reads a scenario") {
  const fs::path dir = temp_dir("hostile");
  // A 9-level alias bomb (10^10 nodes after expansion) in well under 1 KB.
  std::string bomb = "model: lenet5\nplatform: ntua-vm\nl0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int l = 1; l <= 9; ++l) {
    bomb += "l" + std::to_string(l) + ": &a" + std::to_string(l) + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", *a" : "*a") + std::to_string(l - 1);
    bomb += "]\n";
  }
  REQUIRE(bomb.size() < 1000);
  std::ofstream(dir / "self.yaml") << "model: lenet5\nplatform: ntua-vm\ndescription: &s [*s]\n"
                                      "sweep: {product: {workers: [1, 2]}}\n";
  std::ofstream(dir / "bomb.yaml") << bomb;
  std::ofstream(dir / "dup.yaml") << "model: lenet5\nplatform: ntua-vm\nworkers: [1]\nworkers: [2]\n";
  struct Case {
    const char* file;
    const char* where;
    const char* what;
  };
  for (const Case c : {Case{"self.yaml", "self.yaml:3:", "recursive alias"}, Case{"bomb.yaml", "bomb.yaml:", "alias bomb"},
                       Case{"dup.yaml", "dup.yaml:4:", "duplicate key 'workers'"}}) {
    const std::string path = (dir / c.file).string();
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"sweep", path, "--out", (dir / "o").string()},
          std::vector<std::string>{"sweep", path, "--list"},
          std::vector<std::string>{"compare", path, "--platforms", "ntua-vm", "--out", (dir / "c").string()},
          std::vector<std::string>{"predict", path}}) {
      const auto r = run_cli(args);
      INFO(args[0] << ' ' << c.file << ": " << r.err);
      CHECK(r.exit_code == 2);
      CHECK(one_line(r.err));
      CHECK(r.err.find(c.where) != std::string::npos);
      CHECK(r.err.find(c.what) != std::string::npos);
    }
  }
  fs::remove_all(dir);
}

// Bad input the CLI once crashed or hung on (issue 41's black-box fuzz): each exits 2 with one line,
// within seconds.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/run_cli.hpp"

using dtsim::test::run_cli;

namespace {

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

// Runs the CLI and returns its result and wall time in seconds.
std::pair<dtsim::test::CliResult, double> timed(const std::vector<std::string>& args) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_cli(args);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace

TEST_CASE("scenarios::BadInput: a calibration database nested 100,000 levels deep exits 2 with one line",
          "[scenarios][cli]") {
  const auto path =
      (std::filesystem::temp_directory_path() / ("dtsim_deep_db_" + std::to_string(::getpid()) + ".json")).string();
  // With a checksum field the reader dumps the document to hash it: nlohmann's recursive dump of
  // 100,000 nested objects overflowed the stack (SIGSEGV).
  std::string deep;
  for (int i = 0; i < 100'000; ++i) deep += R"({"a":)";
  deep += "1" + std::string(100'000, '}');
  std::ofstream(path) << R"({"checksum": "fnv1a64:0", "format": "dtsim-calibration", "version": 2, )"
                      << R"("hosts": [{"entries": {"s": )" << deep << "}}]}";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"calibrate", "report", "--db", path, "--model", "resnet18", "--device", "host"},
           {"predict", "--model", "resnet18", "--platform", "ntua-vm", "--workers", "1", "--batch", "1"}}) {
    ::setenv("DTSIM_CALIBRATION_DB", path.c_str(), 1);
    const auto r = run_cli(args);
    ::unsetenv("DTSIM_CALIBRATION_DB");
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK(r.err.find("deeper than 64 levels") != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE("scenarios::BadInput: an anchor of 1e-9 samples/s exits 2 at once", "[scenarios][cli]") {
  const auto [r, seconds] = timed({"predict", "--model", "resnet18", "--platform", "gtx1080ti-cluster", "--workers",
                                   "3", "--batch", "1", "--workers-per-node", "1", "--anchor", "1e-09", "--no-overlap",
                                   "--explain"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("--anchor") != std::string::npos);
  CHECK(seconds < 10);
}

TEST_CASE("scenarios::BadInput: --ps auto on a layout no server count fits exits 2 before any search",
          "[scenarios][cli]") {
  const auto [r, seconds] = timed({"predict", "--model", "resnet18", "--platform", "ntua-vm", "--workers", "8",
                                   "--workers-per-node", "1", "--strategy", "ps", "--ps", "auto", "--batch", "8"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("8 workers at 1 per node need 8 nodes but platform 'ntua-vm' has 3") != std::string::npos);
  CHECK(seconds < 10);
}

TEST_CASE("scenarios::BadInput: a simulation whose clock passes 10,000 s ends", "[scenarios][cli]") {
  // 3,333 s iterations (an anchor of 3e-4 samples/s at batch 1), 10 of them: past ~8,000 s a compute job
  // a clock step short of its end re-armed its timer at the same date forever.
  const auto [r, seconds] = timed({"predict", "--model", "resnet18", "--platform", "gtx1080ti-cluster", "--workers",
                                   "3", "--batch", "1", "--workers-per-node", "1", "--anchor", "3e-4", "--no-overlap",
                                   "--iterations", "10"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("3333 s") != std::string::npos);
  CHECK(seconds < 30);
}

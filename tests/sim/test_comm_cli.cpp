// Tests of `dtsim comm` and `dtsim comm pingpong` through the real binary: JSON field names, exit
// codes for bad input, and the published Taiwania 2 check (EDR InfiniBand ~14x 10 GbE at 1000 KB).
#include <catch2/catch.hpp>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

namespace {
struct CliResult {
  int code = -1;
  std::string out;
};

CliResult dtsim_cli(const std::string& args) {
  const std::string cmd = std::string("DTSIM_DATA_DIR=") + DTSIM_SOURCE_DIR + " " + DTSIM_BINARY + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

double bandwidth_at(const nlohmann::json& j, double bytes) {
  for (const auto& p : j.at("points"))
    if (p.at("bytes").get<double>() == bytes) return p.at("bandwidth_Bps").get<double>();
  return 0;
}
}  // namespace

TEST_CASE("sim::comm_cli: pattern JSON carries time, algbw and busbw", "[sim][cli]") {
  const auto r = dtsim_cli("comm --platform taiwania2-ib --pattern allreduce-ring --workers 16 --bytes 25MB --format json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const double t = j.at("time_s").get<double>();
  CHECK(t > 0);
  CHECK(j.at("algbw_Bps").get<double>() == Approx(25e6 / t));
  CHECK(j.at("busbw_Bps").get<double>() == Approx(25e6 / t * 2 * 15 / 16));
  CHECK(j.at("mode").get<std::string>() == "fine");
}

TEST_CASE("sim::comm_cli: pingpong JSON lists points and reproduces the Taiwania 2 IB / 10 GbE ratio", "[sim][cli]") {
  const auto ib = dtsim_cli("comm pingpong --platform taiwania2-ib --format json");
  const auto eth = dtsim_cli("comm pingpong --platform taiwania2-10gbe --format json");
  REQUIRE(ib.code == 0);
  REQUIRE(eth.code == 0);
  const auto jib = nlohmann::json::parse(ib.out);
  const auto jeth = nlohmann::json::parse(eth.out);
  REQUIRE(jib.at("points").size() > 10);
  for (const auto& p : jib.at("points")) {
    CHECK(p.at("time_s").get<double>() > 0);
    CHECK(p.at("bandwidth_Bps").get<double>() == Approx(p.at("bytes").get<double>() / p.at("time_s").get<double>()));
  }
  // Published (NCHC 2019, NetPIPE): ~14x at 1000 KB; accepted within 25%.
  const double ratio = bandwidth_at(jib, 1e6) / bandwidth_at(jeth, 1e6);
  INFO("IB / 10 GbE bandwidth ratio at 1000 KB: " << ratio);
  CHECK(ratio >= 14.0 * 0.75);
  CHECK(ratio <= 14.0 * 1.25);
}

TEST_CASE("sim::comm_cli: bad input exits 2 with a one-line message", "[sim][cli]") {
  for (const std::string args :
       {"comm --platform taiwania2-ib --pattern allreduce-ring --workers 16 --bytes -3MB",
        "comm --platform taiwania2-ib --pattern allreduce-ring --workers 16 --bytes 25 parsecs",
        "comm --platform taiwania2-ib --pattern allreduce-warp --workers 16 --bytes 25MB",
        "comm --platform taiwania2-ib --pattern allreduce-ring --workers 100000 --bytes 25MB",
        "comm --platform taiwania2-ib --pattern allreduce-ring --workers 0 --bytes 25MB",
        "comm --platform taiwania2-ib --pattern allreduce-ring --workers 16 --bytes 25MB --mode turbo",
        "comm --platform no-such-platform --pattern allreduce-ring --workers 16 --bytes 25MB",
        "comm --platform taiwania2-ib --pattern allreduce-ring --workers 16",
        "comm --platform taiwania2-ib --pattern ps --workers 16 --bytes 25MB --ps 0",
        "comm --platform taiwania2-ib --pattern allreduce-ring --workers 16 --bytes 25MB --bogus",
        "comm pingpong --platform localhost"}) {
    const auto r = dtsim_cli(args);
    INFO(args << " -> " << r.out);
    CHECK(r.code == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
}

TEST_CASE("sim::comm_cli: --ps is bounded by the worker count, answered at once", "[sim][cli]") {
  // --ps 10000 with 4 workers used to simulate 40,000 flows for over 20 s.
  for (const std::string placement : {"colocated", "dedicated"}) {
    const auto r = dtsim_cli("comm --platform pitzer --pattern ps --workers 4 --bytes 1MB --ps 10000 --ps-placement " +
                             placement);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out.find("--ps: expected 1..4 servers") != std::string::npos);
  }
  CHECK(dtsim_cli("comm --platform pitzer --pattern ps --workers 4 --bytes 1MB --ps 16").code == 2);
  const auto ok = dtsim_cli("comm --platform pitzer --pattern ps --workers 4 --bytes 1MB --ps 4 --format json");
  INFO(ok.out);
  CHECK(ok.code == 0);
}

// Tests of `dtsim platforms` and `dtsim platform check` through the real binary: exit codes and key output.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct Run {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Run run_dtsim(const std::string& args) {
  const std::string command = std::string("DTSIM_DATA_DIR=") + DTSIM_SOURCE_DIR + " " + DTSIM_BINARY + " " + args + " 2>&1";
  Run r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST_CASE("platforms::cli: dtsim platforms lists every shipped platform", "[platforms][cli]") {
  const Run r = run_dtsim("platforms");
  CHECK(r.exit_code == 0);
  for (const char* name : {"piz-daint", "taiwania2-ib", "stampede2-skx", "localhost"}) CHECK(r.output.find(name) != std::string::npos);
  const Run d = run_dtsim("platforms --devices --format csv");
  CHECK(d.exit_code == 0);
  CHECK(d.output.find("xeon-platinum-8160") != std::string::npos);
}

TEST_CASE("platforms::cli: platform check prints the summary of a shipped platform", "[platforms][cli]") {
  const Run r = run_dtsim("platform check taiwania2-ib");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("bisection") != std::string::npos);
  CHECK(r.output.find("2016 total") != std::string::npos);
  const Run j = run_dtsim("platform check dgx1-p100 --format json");
  CHECK(j.exit_code == 0);
  CHECK(j.output.find("\"devices_per_node\": 8") != std::string::npos);
  CHECK(j.output.find("\"gpu_nic_via_host_memory\": false") != std::string::npos);  // NVLink node: GPUDirect RDMA
  // A PCIe GPU node over RDMA without gpudirect_rdma says how its GPUs reach the NIC.
  const Run pitzer = run_dtsim("platform check pitzer-gpu");
  CHECK(pitzer.output.find("GPU to NIC") != std::string::npos);
  CHECK(pitzer.output.find("11.70 GB/s per node") != std::string::npos);
  CHECK(run_dtsim("platform check ri2-k80").output.find("GPU to NIC") == std::string::npos);
  // Which GPU pairs go peer to peer, and why: NCCL 2.7's rule for the node's CPU.
  CHECK(pitzer.output.find("p2p_level phb (default: NCCL 2.7's rule for CPU 'xeon-gold-6148' (skylake))") !=
        std::string::npos);
  const Run aws = run_dtsim("platform check aws-p2-8xlarge --format json");
  CHECK(aws.output.find("\"p2p_level\": \"pxb\"") != std::string::npos);
  CHECK(aws.output.find("\"gpu_pairs_staged_via_host_memory\": true") != std::string::npos);
  CHECK(j.output.find("\"p2p_level\": null") != std::string::npos);  // NVLink node
}

TEST_CASE("platforms::cli: platform check lists the defaults a file takes and the figures no hardware reaches",
          "[platforms][cli]") {
  const Run pitzer = run_dtsim("platform check pitzer-gpu");
  CHECK(pitzer.exit_code == 0);
  CHECK(pitzer.output.find("default node.intra.gpudirect_rdma") != std::string::npos);
  CHECK(pitzer.output.find("false (GPUs reach the NIC through host memory)") != std::string::npos);
  const Run j = run_dtsim("platform check pitzer-gpu --format json");
  CHECK(j.output.find("\"defaults_used\": {") != std::string::npos);
  CHECK(j.output.find("\"warnings\": []") != std::string::npos);
  // 400 Gb/s written as 400e9 B/s: loads, with the unit slip named on stderr and in the summary.
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_pcli_bits_" + std::to_string(::getpid()) + ".yaml");
  std::ifstream shipped(std::string(DTSIM_SOURCE_DIR) + "/platforms/dgx-h100-superpod.yaml");
  std::stringstream text;
  text << shipped.rdbuf();
  std::string yaml = text.str();
  const auto at = yaml.find("link_bandwidth_Bps: 50.0e9");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, std::string("link_bandwidth_Bps: 50.0e9").size(), "link_bandwidth_Bps: 400e9");
  std::ofstream(path) << yaml;
  const Run bits = run_dtsim("platform check " + path.string());
  CHECK(bits.exit_code == 0);
  CHECK(bits.output.find("dtsim: warning: " + path.string()) != std::string::npos);  // stderr
  CHECK(bits.output.find("if 4e+11 is in bits per second, write 5e+10") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("platforms::cli: a bad platform file exits 2 with a one-line error", "[platforms][cli]") {
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_cli_bad_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "name: bad\ndescription: x\nnodes: 2\nbogus: 1\n";
  const Run r = run_dtsim("platform check " + path.string());
  std::filesystem::remove(path);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("bogus") != std::string::npos);
  CHECK(r.output.find(":4") != std::string::npos);
  const Run missing = run_dtsim("platform check no-such-platform");
  CHECK(missing.exit_code == 2);
  const Run bad_flag = run_dtsim("platform check piz-daint --format xml");
  CHECK(bad_flag.exit_code == 2);
}

// Tests of platform files: every shipped platform loads, derived figures follow their closed forms,
// and each kind of bad input gives a one-line InputError naming file, line and field.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "platforms/platform.hpp"

using dtsim::platforms::load_platform;
using dtsim::platforms::Platform;

namespace {

// A valid 8-node EDR star platform of CPU nodes; tests edit it with `replace`.
const std::string BASE =
    "name: test\n"                               // 1
    "description: test cluster\n"                // 2
    "nodes: 8\n"                                 // 3
    "node:\n"                                    // 4
    "  cpu: xeon-gold-6148\n"                    // 5
    "  cpu_sockets: 2\n"                         // 6
    "  memory_B: 192e9\n"                        // 7
    "  nics: 1\n"                                // 8
    "  source: test\n"                           // 9
    "  intra:\n"                                 // 10
    "    kind: shared-memory\n"                  // 11
    "    link_bandwidth_Bps: 10e9\n"             // 12
    "    latency_s: 0.4e-6\n"                    // 13
    "    source: test\n"                         // 14
    "network:\n"                                 // 15
    "  technology: EDR InfiniBand\n"             // 16
    "  topology: star\n"                         // 17
    "  link_bandwidth_Bps: 12.5e9\n"             // 18
    "  latency_s: 1.0e-7\n"                      // 19
    "  protocol_efficiency: 0.96\n"              // 20
    "  per_message_overhead_s: 0.7e-6\n"         // 21
    "  source: test\n";                          // 22

const std::string GPU_NODE =
    "node:\n"
    "  cpu: xeon-gold-6154\n"
    "  cpu_sockets: 2\n"
    "  gpu: v100-sxm2-32gb\n"
    "  gpus: 8\n"
    "  memory_B: 768e9\n"
    "  nics: 4\n"
    "  source: test\n"
    "  intra:\n"
    "    kind: nvlink-hybrid-cube-mesh\n"
    "    link_bandwidth_Bps: 25e9\n"
    "    latency_s: 1e-6\n"
    "    devices_per_switch: 2\n"
    "    uplink_bandwidth_Bps: 15.75e9\n"
    "    source: test\n";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string with_gpu_node(const std::string& node_text) {
  const auto begin = BASE.find("node:\n");
  const auto end = BASE.find("network:\n");
  return BASE.substr(0, begin) + node_text + BASE.substr(end);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() / ("dtsim_ptest_" + std::to_string(::getpid()) + "_" + name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

Platform load_text(const std::string& name, const std::string& text) { return load_platform(write_temp(name, text)); }

// The InputError message for a bad file; fails the test when the file loads.
std::string error_of(const std::string& name, const std::string& text) {
  const std::string path = write_temp(name, text);
  try {
    (void)load_platform(path);
  } catch (const dtsim::InputError& e) {
    std::filesystem::remove(path);
    return e.what();
  }
  std::filesystem::remove(path);
  FAIL("expected an InputError for " << name);
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("platforms::load_platform: every SYSTEMS.md platform is shipped and loads", "[platforms]") {
  const auto names = dtsim::platforms::platform_names();
  for (const char* expected :
       {"piz-daint", "aws-p2-xlarge", "aws-p2-8xlarge", "dgx1-p100", "taiwania2-ib", "taiwania2-10gbe", "stampede2-skx",
        "pitzer", "pitzer-gpu", "ri2-skylake", "ri2-k80", "ri2-broadwell", "amd-epyc", "gtx1080ti-cluster", "ntua-vm",
        "localhost"}) {
    INFO(expected);
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
  for (const auto& name : names) {
    INFO(name);
    const Platform p = load_platform(name);
    CHECK(p.name == name);
    CHECK(p.nodes >= 1);
    CHECK(p.node_peak_flops() > 0);
    CHECK(p.worker_device().peak_flops > 0);
    CHECK_FALSE(p.network.source.empty());
    CHECK_FALSE(p.node.intra.source.empty());
    if (p.nodes >= 2) CHECK(p.bisection_bandwidth_Bps() > 0);
    if (p.storage.kind != dtsim::platforms::StorageKind::NONE) CHECK_FALSE(p.storage.source.empty());
  }
}

TEST_CASE("platforms::load_platform: shipped figures that other folders rely on", "[platforms]") {
  const Platform daint = load_platform("piz-daint");
  CHECK(daint.network.topology == dtsim::platforms::TopologyKind::DRAGONFLY);
  CHECK(daint.node.gpus == 1);
  CHECK(daint.worker_device().name == "p100-pcie");
  const Platform dgx = load_platform("dgx1-p100");
  CHECK(dgx.node.intra.kind == dtsim::platforms::IntraNodeKind::NVLINK_HYBRID_CUBE_MESH);
  CHECK(dgx.node_peak_flops() == Approx(8 * 10.6e12));
  const Platform skx = load_platform("stampede2-skx");
  CHECK(skx.network.fat_tree.oversubscription == Approx(28.0 / 20.0));
  CHECK_FALSE(skx.has_gpus());
  CHECK(skx.worker_device().name == "xeon-platinum-8160");
  // The NetPIPE check: 1000 KB over EDR vs 10 GbE on Taiwania 2 (ratio from physical figures, not tuned).
  const Platform ib = load_platform("taiwania2-ib");
  const Platform eth = load_platform("taiwania2-10gbe");
  const double ratio = eth.network.message_time_s(1024000, eth.network.hops_between_nodes()) /
                       ib.network.message_time_s(1024000, ib.network.hops_between_nodes());
  CHECK(ratio > 8);
  CHECK(ratio < 20);
  const Platform local = load_platform("localhost");
  CHECK(local.worker_device().name == "host");
  CHECK(local.node.memory_B > 0);
}

TEST_CASE("platforms::Platform: bisection bandwidth follows the documented formulas", "[platforms]") {
  const double B = 12.5e9;
  SECTION("star: floor(nodes/2) ports, capped by the backbone") {
    CHECK(load_text("s1", BASE).bisection_bandwidth_Bps() == Approx(4 * B));
    CHECK(load_text("s2", replace(BASE, "nodes: 8", "nodes: 9")).bisection_bandwidth_Bps() == Approx(4 * B));
    const auto blocking = replace(BASE, "  source: test\n", "  source: test\n") + "  backbone_bandwidth_Bps: 20e9\n";
    CHECK(load_text("s3", blocking).bisection_bandwidth_Bps() == Approx(20e9));
    CHECK(load_text("s4", replace(BASE, "nodes: 8", "nodes: 1")).bisection_bandwidth_Bps() == 0);
  }
  SECTION("fat tree: the thinnest link layer, half of it per half of the leaves") {
    // 4 leaves x 4 nodes, 2 uplinks per leaf: 2:1 oversubscribed; top layer 4 x 2 links -> 4 links per half.
    const auto tree = replace(replace(BASE, "nodes: 8", "nodes: 16"), "topology: star",
                              "topology: fat-tree\n  fat_tree: {levels: 2, down: [4, 4], up: [1, 2], parallel: [1, 1]}");
    const Platform p = load_text("f1", tree);
    CHECK(p.network.fat_tree.oversubscription == Approx(2.0));
    CHECK(p.bisection_bandwidth_Bps() == Approx(4 * B));
    // Half populated: only half the tree's links count.
    CHECK(load_text("f2", replace(tree, "nodes: 16", "nodes: 8")).bisection_bandwidth_Bps() == Approx(2 * B));
  }
  SECTION("dragonfly: cut between halves of the groups") {
    const auto df = replace(replace(BASE, "nodes: 8", "nodes: 64"), "topology: star",
                            "topology: dragonfly\n  dragonfly: {groups: 4, chassis_per_group: 2, routers_per_chassis: 2,"
                            " nodes_per_router: 4, group_links: 1, chassis_links: 1, router_links: 1}");
    // 2 x 2 group pairs across the cut, one link each; injection of 32 nodes is far larger.
    CHECK(load_text("d1", df).bisection_bandwidth_Bps() == Approx(4 * B));
    // Global links at their own rate.
    const auto slow = replace(df, "router_links: 1}", "router_links: 1, global_link_bandwidth_Bps: 1.0e9}");
    CHECK(load_text("d2", slow).bisection_bandwidth_Bps() == Approx(4 * 1.0e9));
  }
  SECTION("torus: two planes of N/k links across the largest dimension") {
    const auto torus =
        replace(replace(BASE, "nodes: 8", "nodes: 64"), "topology: star", "topology: torus\n  torus: {dims: [4, 4, 4]}");
    CHECK(load_text("t1", torus).bisection_bandwidth_Bps() == Approx(2 * 16 * B));
  }
}

TEST_CASE("platforms::Network: message time is overhead + hops x latency + bytes / effective bandwidth", "[platforms]") {
  const Platform p = load_text("m1", BASE);
  CHECK(p.network.hops_between_nodes() == 2);
  CHECK(p.network.message_time_s(0, 2) == Approx(0.7e-6 + 2e-7));
  CHECK(p.network.message_time_s(12e9, 2) == Approx(0.7e-6 + 2e-7 + 12e9 / (12.5e9 * 0.96)));
}

TEST_CASE("platforms::load_platform: bad input names file, line and field", "[platforms]") {
  SECTION("unknown key") {
    const auto msg = error_of("unknown_key", replace(BASE, "  nics: 1\n", "  nics: 1\n  nic_count: 2\n"));
    CHECK(contains(msg, "unknown_key.yaml:9"));
    CHECK(contains(msg, "nic_count"));
  }
  SECTION("negative bandwidth") {
    const auto msg = error_of("neg_bw", replace(BASE, "link_bandwidth_Bps: 12.5e9", "link_bandwidth_Bps: -12.5e9"));
    CHECK(contains(msg, "neg_bw.yaml:18"));
    CHECK(contains(msg, "link_bandwidth_Bps"));
  }
  SECTION("zero bandwidth") {
    CHECK(contains(error_of("zero_bw", replace(BASE, "link_bandwidth_Bps: 10e9", "link_bandwidth_Bps: 0")),
                   "zero_bw.yaml:12"));
  }
  SECTION("hybrid cube mesh with 4 GPUs") {
    const auto msg = error_of("hcm4", replace(with_gpu_node(GPU_NODE), "gpus: 8", "gpus: 4"));
    CHECK(contains(msg, "hcm4.yaml:"));
    CHECK(contains(msg, "needs exactly 8 GPUs"));
  }
  SECTION("GPUs on a shared-memory node") {
    const auto node = replace(replace(GPU_NODE, "kind: nvlink-hybrid-cube-mesh", "kind: shared-memory"),
                              "    devices_per_switch: 2\n    uplink_bandwidth_Bps: 15.75e9\n", "");
    CHECK(contains(error_of("shm_gpu", with_gpu_node(node)), "shared-memory"));
  }
  SECTION("GPUs per PCIe switch must divide the GPU count") {
    const auto node = replace(replace(GPU_NODE, "kind: nvlink-hybrid-cube-mesh", "kind: pcie"), "devices_per_switch: 2",
                              "devices_per_switch: 3");
    CHECK(contains(error_of("pcie_div", with_gpu_node(node)), "devices_per_switch"));
  }
  SECTION("fat tree too small for the nodes") {
    const auto tree = replace(replace(BASE, "nodes: 8", "nodes: 20"), "topology: star",
                              "topology: fat-tree\n  fat_tree: {levels: 2, down: [4, 4], up: [1, 2], parallel: [1, 1]}");
    const auto msg = error_of("ft_small", tree);
    CHECK(contains(msg, "16 node slots but nodes is 20"));
    CHECK(contains(msg, "ft_small.yaml:18"));
  }
  SECTION("dragonfly too small for the nodes") {
    const auto df = replace(replace(BASE, "nodes: 8", "nodes: 100"), "topology: star",
                            "topology: dragonfly\n  dragonfly: {groups: 2, chassis_per_group: 2, routers_per_chassis: 2,"
                            " nodes_per_router: 4, group_links: 1, chassis_links: 1, router_links: 1}");
    CHECK(contains(error_of("df_small", df), "32 node slots but nodes is 100"));
  }
  SECTION("fat tree lists of the wrong length") {
    const auto tree = replace(BASE, "topology: star",
                              "topology: fat-tree\n  fat_tree: {levels: 2, down: [8], up: [1, 2], parallel: [1, 1]}");
    CHECK(contains(error_of("ft_len", tree), "one entry per level"));
  }
  SECTION("unknown device name") {
    const auto msg = error_of("bad_dev", replace(BASE, "cpu: xeon-gold-6148", "cpu: xeon-gold-9999"));
    CHECK(contains(msg, "bad_dev.yaml:5"));
    CHECK(contains(msg, "xeon-gold-9999"));
  }
  SECTION("a GPU named as the CPU") {
    CHECK(contains(error_of("gpu_as_cpu", replace(BASE, "cpu: xeon-gold-6148", "cpu: p100-sxm2")), "is a GPU"));
  }
  SECTION("efficiency above 1") {
    CHECK(contains(error_of("eff", replace(BASE, "protocol_efficiency: 0.96", "protocol_efficiency: 1.5")),
                   "protocol_efficiency"));
  }
  SECTION("absurd node count") {
    CHECK(contains(error_of("huge", replace(BASE, "nodes: 8", "nodes: 1e12")), "nodes"));
    CHECK(contains(error_of("neg", replace(BASE, "nodes: 8", "nodes: -3")), "nodes"));
  }
  SECTION("topology section that does not apply") {
    CHECK(contains(error_of("wrong_section", BASE + "  torus: {dims: [2, 4]}\n"), "does not apply"));
  }
  SECTION("missing required section") {
    CHECK(contains(error_of("no_net", BASE.substr(0, BASE.find("network:\n"))), "network"));
  }
  SECTION("malformed YAML") {
    CHECK(contains(error_of("malformed", "name: [unclosed\n"), "malformed.yaml"));
  }
  SECTION("unknown shipped name lists the known ones") {
    try {
      (void)load_platform("no-such-cluster");
      FAIL("expected InputError");
    } catch (const dtsim::InputError& e) {
      CHECK(contains(e.what(), "piz-daint"));
    }
  }
}

TEST_CASE("platforms::load_platform: error messages are one line", "[platforms]") {
  const auto msg = error_of("one_line", replace(BASE, "latency_s: 1.0e-7", "latency_s: -1"));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("platforms::load_platform: absurd topology sizes are refused, not overflowed", "[platforms]") {
  const auto tree = replace(BASE, "topology: star",
                            "topology: fat-tree\n  fat_tree: {levels: 5, down: [100000, 100000, 100000, 100000, 100000],"
                            " up: [1, 1, 1, 1, 1], parallel: [1, 1, 1, 1, 1]}");
  CHECK(contains(error_of("ft_huge", tree), "more than 1000000"));
  const auto df = replace(BASE, "topology: star",
                          "topology: dragonfly\n  dragonfly: {groups: 100000, chassis_per_group: 100000, routers_per_chassis: "
                          "100000, nodes_per_router: 100000, group_links: 1, chassis_links: 1, router_links: 1}");
  CHECK(contains(error_of("df_huge", df), "more than 1000000"));
}

TEST_CASE("platforms::load_platform: figures outside physical bounds are refused with file and line", "[platforms]") {
  // 1e-320 passed the (0, 1] check and later failed inside the simulator; 1e-300 gave 1e292 s iterations.
  for (const char* tiny : {"1e-320", "1e-300", "0.0001"}) {
    const auto msg = error_of("eff", replace(BASE, "protocol_efficiency: 0.96", std::string("protocol_efficiency: ") + tiny));
    INFO(msg);
    CHECK(contains(msg, "eff.yaml:20"));
    CHECK(contains(msg, "between 0.001 and 1"));
  }
  CHECK(contains(error_of("bw", replace(BASE, "link_bandwidth_Bps: 12.5e9", "link_bandwidth_Bps: 1e-300")), "bw.yaml:18"));
  CHECK(contains(error_of("bw_big", replace(BASE, "link_bandwidth_Bps: 12.5e9", "link_bandwidth_Bps: 1e300")),
                 "bw_big.yaml:18"));
  CHECK(contains(error_of("lat", replace(BASE, "latency_s: 1.0e-7", "latency_s: 1e6")), "lat.yaml:19"));
  CHECK(load_text("lat0", replace(BASE, "latency_s: 1.0e-7", "latency_s: 0")).network.latency_s == 0);  // zero stays allowed
}

TEST_CASE("platforms::load_platform: duplicate keys are errors naming both lines", "[platforms]") {
  const auto msg = error_of("dup", replace(BASE, "  nics: 1\n", "  nics: 1\n  nics: 4\n"));
  CHECK(contains(msg, "dup.yaml:9: duplicate key 'nics' (first at line 8)"));
}

TEST_CASE("platforms::load_platform: a name too long for a file name is an unknown name", "[platforms]") {
  try {
    (void)load_platform(std::string(300, 'p'));
    FAIL("expected InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(contains(e.what(), "unknown platform"));
    CHECK(std::string(e.what()).size() < 1000);
  }
}

TEST_CASE("platforms::Platform: shipped DGX A100 and DGX H100 clusters load with NVSwitch nodes", "[platforms]") {
  const auto a100 = dtsim::platforms::load_platform("dgx-a100-cluster");
  CHECK(a100.node.intra.kind == dtsim::platforms::IntraNodeKind::NVSWITCH);
  CHECK(a100.node.intra.links_per_gpu == 12);
  CHECK(a100.node.gpus == 8);
  const auto h100 = dtsim::platforms::load_platform("dgx-h100-superpod");
  // 18 NVLink 4 links at NCCL's 20.6 GB/s data rate each (of 25 GB/s signalling: 450 GB/s per direction).
  CHECK(h100.node.intra.link_bandwidth_Bps * h100.node.intra.links_per_gpu == Approx(18 * 20.6e9));
  CHECK(h100.network.link_bandwidth_Bps == Approx(50e9));
}

TEST_CASE("platforms::load_platform: NVLink pairs and NVSwitch nodes, and the fields their kinds do not use", "[platforms]") {
  const auto pairs_node = replace(replace(GPU_NODE, "kind: nvlink-hybrid-cube-mesh", "kind: nvlink"), "gpus: 8", "gpus: 4") +
                          "    pairs: [[0, 1, 2], [2, 3, 2], [1, 2, 1]]\n";
  const auto p = load_text("pairs4", with_gpu_node(pairs_node));
  REQUIRE(p.node.intra.pairs.size() == 3);
  CHECK(p.node.intra.pairs[2].a == 1);
  CHECK(p.node.intra.pairs[2].bricks == 1);
  CHECK(contains(error_of("pair_range", with_gpu_node(replace(pairs_node, "[2, 3, 2]", "[2, 4, 2]"))), "names GPU 4"));
  CHECK(contains(error_of("pair_twice", with_gpu_node(replace(pairs_node, "[2, 3, 2]", "[1, 0, 1]"))), "twice"));
  CHECK(contains(error_of("pair_self", with_gpu_node(replace(pairs_node, "[2, 3, 2]", "[2, 2, 1]"))), "[gpu_a, gpu_b, bricks]"));
  CHECK(contains(error_of("pairs_missing", with_gpu_node(replace(GPU_NODE, "kind: nvlink-hybrid-cube-mesh", "kind: nvlink"))),
                 "needs 'pairs'"));
  const auto switch_node = replace(GPU_NODE, "kind: nvlink-hybrid-cube-mesh", "kind: nvswitch") + "    links_per_gpu: 12\n";
  CHECK(load_text("nvsw", with_gpu_node(switch_node)).node.intra.links_per_gpu == 12);
  CHECK(contains(error_of("nvsw_nolinks", with_gpu_node(replace(GPU_NODE, "kind: nvlink-hybrid-cube-mesh", "kind: nvswitch"))),
                 "needs 'links_per_gpu'"));
  CHECK(contains(error_of("nvsw_pairs", with_gpu_node(switch_node + "    pairs: [[0, 1, 1]]\n")), "only for kind 'nvlink'"));
  CHECK(contains(error_of("hcm_lpg", with_gpu_node(GPU_NODE + "    links_per_gpu: 6\n")), "only for kind 'nvswitch'"));
}

TEST_CASE("platforms::load_platform: collective_library names the site's library with its line", "[platforms]") {
  const Platform plain = load_text("lib_plain", replace(BASE, "nodes: 8\n", "nodes: 8\ncollective_library: mvapich2-2.3\n"));
  CHECK(plain.collective_library == "mvapich2-2.3");
  CHECK(contains(plain.collective_library_at, ":4"));
  const Platform sourced = load_text(
      "lib_sourced",
      replace(BASE, "nodes: 8\n", "nodes: 8\ncollective_library: {value: openmpi-4.0, source: \"site guide\"}\n"));
  CHECK(sourced.collective_library == "openmpi-4.0");
  CHECK(sourced.figure_sources.at("collective_library") == "site guide");
  CHECK(load_text("lib_absent", BASE).collective_library.empty());  // the default rule decides (sim/)
  CHECK(contains(error_of("lib_empty", replace(BASE, "nodes: 8\n", "nodes: 8\ncollective_library: \"\"\n")),
                 "'collective_library' must not be empty"));
  CHECK(contains(error_of("lib_key", replace(BASE, "nodes: 8\n", "nodes: 8\ncollective_library: {name: x}\n")),
                 "collective_library"));
}

TEST_CASE("platforms::load_platform: node.nics is required, not left to a default", "[platforms]") {
  const auto msg = error_of("no_nics", replace(BASE, "  nics: 1\n", ""));
  CHECK(contains(msg, "no_nics.yaml:"));
  CHECK(contains(msg, "missing required field 'nics'"));
}

TEST_CASE("platforms::load_platform: every optional field left out is listed with the value taken", "[platforms]") {
  const Platform p = load_text("defaults", BASE);
  // BASE leaves out the transports, the star's backbone, storage and the collective library.
  CHECK(p.defaults_used.at("node.intra.transport") == "shm (by intra kind shared-memory)");
  CHECK(contains(p.defaults_used.at("network.transport"), "(by technology 'EDR InfiniBand')"));
  CHECK(p.defaults_used.at("network.backbone_bandwidth_Bps") == "0 (a non-blocking switch)");
  CHECK(contains(p.defaults_used.at("storage.kind"), "none"));
  CHECK(contains(p.defaults_used.at("collective_library"), "none named"));
  CHECK(p.defaults_used.size() == 5);
  // Stating a field removes it from the list.
  const Platform stated = load_text("stated", replace(BASE, "  topology: star\n",
                                                      "  topology: star\n  backbone_bandwidth_Bps: 0\n"));
  CHECK(stated.defaults_used.count("network.backbone_bandwidth_Bps") == 0);
  CHECK(p.warnings.empty());
}

TEST_CASE("platforms::load_platform: a figure no catalogued hardware reaches is a warning naming the unit slip",
          "[platforms]") {
  // 400 Gb/s written as 400e9 B/s: accepted (within the physical bounds) but 3.2 Tb/s per port.
  const Platform nic = load_text("nic_bits", replace(BASE, "link_bandwidth_Bps: 12.5e9", "link_bandwidth_Bps: 400e9"));
  REQUIRE(nic.warnings.size() == 1);
  INFO(nic.warnings[0]);
  CHECK(contains(nic.warnings[0], "nic_bits.yaml:18: network: field 'link_bandwidth_Bps' is 4e+11 B/s (3200 Gb/s"));
  CHECK(contains(nic.warnings[0], "if 4e+11 is in bits per second, write 5e+10 (bytes per second)"));
  // The fastest NIC port (800 Gb/s = 100e9 B/s) itself is no warning.
  CHECK(load_text("nic_xdr", replace(BASE, "link_bandwidth_Bps: 12.5e9", "link_bandwidth_Bps: 100e9")).warnings.empty());
  const Platform mem = load_text("mem_gb", replace(BASE, "memory_B: 192e9", "memory_B: 192"));
  REQUIRE(mem.warnings.size() == 1);
  CHECK(contains(mem.warnings[0], "mem_gb.yaml:7: node: field 'memory_B' is 192 bytes"));
  CHECK(contains(mem.warnings[0], "write 1.92e+11"));
}

TEST_CASE("platforms::load_platform: no shipped platform warns", "[platforms]") {
  for (const auto& name : dtsim::platforms::platform_names()) {
    INFO(name);
    CHECK(load_platform(name).warnings.empty());
  }
}

// Platforms built in code for the sim tests: uniform networks where closed forms hold exactly.
#pragma once
#include <cstdio>
#include <string>

#include "platforms/platform.hpp"

namespace dtsim::test_platforms {

// `nodes` CPU nodes on one non-blocking switch: ports of bw_Bps and latency_s each, no NIC overhead,
// full protocol efficiency, and an intra-node path 1000x faster so it never matters.
inline platforms::Platform uniform_star(int nodes, double bw_Bps, double latency_s) {
  platforms::Platform p;
  p.name = "test-star";
  p.nodes = nodes;
  p.node.cpu = "test-cpu";
  p.node.intra.kind = platforms::IntraNodeKind::SHARED_MEMORY;
  p.node.intra.link_bandwidth_Bps = bw_Bps * 1000;
  p.node.intra.latency_s = 0;
  p.network.technology = "test";
  p.network.topology = platforms::TopologyKind::STAR;
  p.network.link_bandwidth_Bps = bw_Bps;
  p.network.latency_s = latency_s;
  return p;
}

// GPU nodes (PCIe, 2 GPUs per switch) on a 2-level fat tree with `per_leaf` nodes per leaf switch.
inline platforms::Platform gpu_fat_tree(int nodes, int gpus) {
  platforms::Platform p = uniform_star(nodes, 12.5e9, 1e-6);
  p.name = "test-fat-tree";
  p.node.gpu = "test-gpu";
  p.node.gpus = gpus;
  p.node.intra.kind = platforms::IntraNodeKind::PCIE;
  p.node.intra.link_bandwidth_Bps = 16e9;
  p.node.intra.uplink_bandwidth_Bps = 16e9;
  p.node.intra.devices_per_switch = 2;
  p.node.intra.latency_s = 1e-6;
  p.network.topology = platforms::TopologyKind::FAT_TREE;
  p.network.fat_tree.levels = 2;
  p.network.fat_tree.down = {4, nodes / 4};
  p.network.fat_tree.up = {1, 2};
  p.network.fat_tree.parallel = {1, 1};
  return p;
}

inline std::string fmt_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace dtsim::test_platforms

// NCCL 2.7's algorithm and protocol choice for allreduce (src/graph/tuning.cc of NVIDIA/nccl at commit
// 01afd20, 2020: ncclTopoTuneModel and ncclTopoGetAlgoTime): for every enabled algorithm (ring, tree)
// and protocol (LL, LL128, Simple) NCCL predicts latency + bytes / algorithm bandwidth from its own
// constants and runs the fastest. dtsim evaluates the same model to choose, then simulates the choice:
// the algorithm's flows on the platform, the protocol's bandwidth fraction (LL's 8-byte lines carry 4
// bytes of data and a flag; LL128 keeps 120 of 128 bytes) and the latency NCCL's model gives the choice
// once per call, less the hop latencies the simulated flows already pay on the platform (so that a
// protocol chosen for its low latency is charged the same latencies it was chosen on). Channels are not
// separate flows: one flow per ring edge already takes the bandwidth NCCL spreads over its channels.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "sim/src/coll/library.hpp"

namespace dtsim::sim {
namespace {

enum Algo { TREE = 0, RING = 1 };
enum Proto { LL = 0, LL128 = 1, SIMPLE = 2 };
constexpr std::array<const char*, 2> ALGO_NAMES{"tree", "ring"};
constexpr std::array<const char*, 3> PROTO_NAMES{"LL", "LL128", "Simple"};

// baseLat (us): once per call, per algorithm and protocol.
constexpr double BASE_LAT_US[2][3] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}};
// hwLat (us): per step, by hardware class (NVLink, PCI, network), algorithm and protocol.
enum Hw { NVLINK = 0, PCI = 1, NET = 2 };
constexpr double HW_LAT_US[3][2][3] = {
    {{.52, 1.2, 28}, {.47, 1.9, 3.4}},
    {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}},
    {{5.0, 8.5, 50}, {2.7, 4.0, 9.6}},
};
// Intra-node LL steps cost 1.8x when the communicator spans nodes.
constexpr double LL_MULTINODE_INTRA_LAT = 1.8;
// Protocol bandwidth fractions of the bus bandwidth.
constexpr double RING_LL_BW = 1.0 / 4.0;
constexpr double RING_LL128_BW = 0.92;           // 120/128 payload per line
constexpr double RING_LL128_BW_ONE_PER_NODE = 0.7;  // ppn < 2: the GPU sends and receives through the NIC
constexpr double TREE_BW = 0.9;
constexpr double TREE_LL_BW = 1.0 / 3.8;
constexpr double TREE_LL128_BW = 0.915;
constexpr double TREE_LL128_BW_ONE_NODE = 7.0 / 9.0;
constexpr double MAX_TREE_BW_GBps = 80.0;          // more than 2 nodes
constexpr double MAX_TREE_BW_FEW_NODES_GBps = 110.0;  // 1-2 nodes
// Ring Simple across nodes: latency x1.9 from bytes >= ranks/16 x 64 KiB ("plateau effect of ring").
constexpr double RING_PLATEAU_LAT = 1.9;
constexpr double RING_PLATEAU_B_PER_16_RANKS = 65536;
// Trees deviate from the model at medium sizes: bandwidth factor by log2(bytes / 64), 64 B to 128 MiB.
constexpr double TREE_CORRECTION[3][22] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9},
};
constexpr double US = 1e-6;
constexpr double GBps = 1e9;

int log2i(double x) { return x >= 1 ? static_cast<int>(std::floor(std::log2(x))) : 0; }

// Fraction of the bus bandwidth protocol p reaches on algorithm a (what the simulation applies).
double protocol_fraction(const LibraryCall& c, int a, int p) {
  const bool one_per_node = c.ranks_per_node() < 2;
  if (a == RING) return p == LL ? RING_LL_BW : p == LL128 ? (one_per_node ? RING_LL128_BW_ONE_PER_NODE : RING_LL128_BW) : 1.0;
  return p == LL ? TREE_LL_BW : p == LL128 ? (c.nodes == 1 ? TREE_LL128_BW_ONE_NODE : TREE_LL128_BW) : 1.0;
}

struct ModelTerms {
  double latency_s = 0;    // NCCL's latency term: base plus per-step hardware latencies
  double platform_s = 0;   // the same steps at the platform's own hop latencies (what the flows pay)
  double algbw_Bps = 0;
};

ModelTerms nccl_model_terms(const LibraryCall& c, int a, int p) {
  const int n = c.ranks;
  const int nsteps = 2 * (n - 1);
  const int inter_steps = 2 * (c.nodes - 1);
  // NCCL's graph search sets a ring's speed to its slowest link: the NIC once the ring leaves the node.
  const double speed_GBps =
      (c.nodes == 1 ? c.intra_bandwidth_Bps : std::min(c.intra_bandwidth_Bps, c.inter_bandwidth_Bps)) / GBps;
  double bus = speed_GBps;
  if (a == TREE) bus = std::min(bus * TREE_BW, c.nodes > 2 ? MAX_TREE_BW_GBps : MAX_TREE_BW_FEW_NODES_GBps);
  bus *= protocol_fraction(c, a, p);
  double algbw = bus * (a == RING ? static_cast<double>(n) / nsteps : 0.5);
  const int intra_hw = c.intra_nvlink ? NVLINK : PCI;
  double intra_lat = HW_LAT_US[intra_hw][a][p];
  const double inter_lat = HW_LAT_US[NET][a][p];
  if (c.nodes > 1 && p == LL) intra_lat *= LL_MULTINODE_INTRA_LAT;
  double lat = BASE_LAT_US[a][p];
  const int intra_steps = a == RING ? nsteps - inter_steps : 2 * (c.ranks / c.nodes - 1);
  const int net_steps = a == RING ? inter_steps : 2 * log2i(c.nodes);
  lat += intra_steps * intra_lat + net_steps * inter_lat;
  const int log_size = log2i(c.bytes / 64);
  if (a == TREE && log_size < 22) algbw *= TREE_CORRECTION[p][log_size];
  if (a == RING && p == SIMPLE && c.nodes > 1 && c.bytes >= n / 16.0 * RING_PLATEAU_B_PER_16_RANKS) lat *= RING_PLATEAU_LAT;
  return {lat * US, intra_steps * c.intra_latency_s + net_steps * c.inter_latency_s, algbw * GBps};
}

}  // namespace

// NCCL's predicted time of one allreduce with algorithm a and protocol p; +inf when disabled.
double nccl_model_time_s(const LibraryCall& c, int a, int p) {
  if (p == LL128 && !c.ll128_capable) return std::numeric_limits<double>::infinity();
  const ModelTerms t = nccl_model_terms(c, a, p);
  if (!(t.algbw_Bps > 0)) return std::numeric_limits<double>::infinity();
  return t.latency_s + c.bytes / t.algbw_Bps;
}

namespace {

// NVLink SHARP (NVLS), where the NVSwitch reduces: NCCL's tuner (2.17+) picks it for allreduce from about
// 2 MiB up on an 8-GPU Hopper node: nccl-tests all_reduce_perf on 8x H200 reach 39.9 GB/s bus bandwidth at
// 1 MiB as with rings, and the NVLS plateau (482 GB/s at 16 GiB, against 368 GB/s with NVLS disabled) from
// there up (stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md). The NVLS rows of the
// 2.17+ tuner are not modelled: this threshold stands in for them, on top of the 2.7 tuner's ring/tree choice.
constexpr double NVLS_MIN_B = 2.0 * 1024 * 1024;

LibraryChoice nccl_choose(const LibraryCall& c, const std::string& forced) {
  if (forced.empty() && c.nvls_capable && c.ranks_per_node() > 1 && c.bytes >= NVLS_MIN_B) return {"nvls", "Simple", 1.0, 0};
  int algo_from = TREE, algo_to = RING;
  if (forced == "ring") algo_from = RING;
  else if (forced == "tree") algo_to = TREE;
  else if (!forced.empty()) return {forced, "-", 1.0, 0};  // not an NCCL algorithm: run as named
  int best_a = RING, best_p = SIMPLE;
  double best = std::numeric_limits<double>::infinity();
  for (int a = algo_from; a <= algo_to; ++a)
    for (int p = LL; p <= SIMPLE; ++p) {
      const double t = nccl_model_time_s(c, a, p);
      if (t < best) {
        best = t;
        best_a = a;
        best_p = p;
      }
    }
  const ModelTerms t = nccl_model_terms(c, best_a, best_p);
  const double base_s = BASE_LAT_US[best_a][best_p] * US;
  return {ALGO_NAMES[static_cast<std::size_t>(best_a)], PROTO_NAMES[static_cast<std::size_t>(best_p)],
          protocol_fraction(c, best_a, best_p), std::max(base_s, t.latency_s - t.platform_s)};
}

}  // namespace

CollectiveLibrary library_nccl() {
  return {"nccl-2.7",
          "NCCL 2.7 tuner: ring or double binary tree, LL/LL128/Simple by its latency-bandwidth model",
          nccl_choose};
}

}  // namespace dtsim::sim

// Internal to sim/: the collective-algorithm table. Each algorithm lives in its own file
// (allreduce_ring.cpp, ...) and is listed once in table.cpp, the way SMPI registers its
// `allreduce-*` algorithms: selection, --help text and error messages are generated from the table.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/comm.hpp"

namespace dtsim::sim {

class World;

using Done = std::function<void()>;

// Where a collective's ranks sit: enough for byte accounting in closed form.
struct RankGeometry {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;  // node-major placement; the last node may hold fewer
};

// Bytes a collective moves, summed over all ranks, split by node boundary.
struct ByteSplit {
  double inter_node_B = 0;
  double intra_node_B = 0;
};

// A uniform network for closed forms: every rank has one full-duplex link of `bandwidth_Bps` per
// direction to a non-blocking switch; a message pays `latency_s` (end to end) before bandwidth.
struct UniformNetwork {
  double latency_s = 0;
  double bandwidth_Bps = 0;
};

struct CollectiveAlgorithm {
  std::string operation;    // "allreduce", "reduce-scatter", "allgather", "broadcast", "alltoall"
  std::string name;         // "ring", "tree", ...; the full name is operation-name
  std::string description;  // one line for --help and docs
  // Starts the collective over `ranks` (rank list order is the algorithm's rank order); `done` is
  // called once every rank holds the result. `mode` is already resolved (COARSE or FINE).
  std::function<void(World&, const std::vector<int>& ranks, double bytes, CommMode mode, Done done)> start;
  // algbw -> busbw (NCCL-tests convention) for n ranks.
  std::function<double(int n)> busbw_factor;
  // Bytes moved by one call of `bytes`, by node boundary.
  std::function<ByteSplit(const RankGeometry&, double bytes)> bytes_moved;
  // Time of one call on a UniformNetwork (the closed form the tests check the simulation against).
  std::function<double(const UniformNetwork&, int n, double bytes)> closed_form_s;

  std::string full_name() const { return operation + "-" + name; }
};

// Every algorithm, in table order.
const std::vector<CollectiveAlgorithm>& collective_table();
// The operations of the table, in table order ("allreduce", "broadcast", ...).
std::vector<std::string> collective_operations();
// The algorithm whose full name is `full_name` ("reduce-scatter-ring"); nullptr when there is none.
const CollectiveAlgorithm* collective_by_full_name_or_null(const std::string& full_name);
// The algorithm `operation`-`name` ("allreduce", "ring"); nullptr when there is none.
const CollectiveAlgorithm* collective_or_null(const std::string& operation, const std::string& name);
// The same, or InputError naming `what` (a flag or field) and listing the accepted names.
const CollectiveAlgorithm& collective_by_name(const std::string& operation, const std::string& name,
                                              const std::string& what);
// "ring, tree, rhd, hier": the names of one operation's algorithms, for messages and help.
std::string collective_names(const std::string& operation);

// Runs `algorithm` over `ranks` on `world`: checks the ranks, handles one rank, resolves AUTO mode
// and reuses the duration of an identical coarse collective that ran alone (see start_allreduce).
void start_collective(World& world, const CollectiveAlgorithm& algorithm, const std::vector<int>& ranks,
                      double bytes, CommMode mode, Done done);

// Shared by the algorithm files.
namespace coll {
// Calls `done` once the returned function has been called `count` times.
std::function<void()> countdown(int count, Done done);
// Ranks grouped by node in order of first appearance.
std::vector<std::vector<int>> group_by_node(const World& world, const std::vector<int>& ranks);
// Coarse collectives that run alone on the network are replayed, not simulated again: `run` starts the
// collective (`own_flows` flows) and calls its argument at the end. When no other transfer is in flight
// and link usage over time is not recorded (--trace), a collective of the same `key` that ran alone before
// is reused: its duration is waited and the bytes it moved over each link are charged when it ends. The
// first run of a key is measured and cached only if no other flow started during it.
void run_alone_or_reuse(World& w, const std::string& key, std::int64_t own_flows, const std::function<void(Done)>& run,
                        Done done);
// A key for run_alone_or_reuse: the algorithm, the bytes and the ranks of each channel in order.
std::string collective_signature(const std::string& algorithm, const std::vector<std::vector<int>>& channels, double bytes);
// A ring of `steps` steps of bytes/n (ring_pass.cpp): fine mode sends every step, coarse mode one flow per
// edge carrying all steps' chunks plus the other steps' latencies.
void ring_pass(World& w, const std::vector<int>& ranks, double bytes, int steps, CommMode mode, Done done);
// Bytes of a ring pass of `steps` steps of bytes/n in node-major order, by node boundary.
ByteSplit ring_pass_bytes(const RankGeometry& g, double bytes, int steps);
// Ring-equivalent bytes of an allreduce (2(n-1)/n x bytes per rank) split by node boundary, for
// algorithms whose per-rank traffic matches the ring's.
ByteSplit ring_like_bytes(const RankGeometry& g, double bytes);
// NCCL's channels over rail NICs: where the ranks span nodes of equal rank counts whose GPUs each reach
// the network through their own NIC (World::rails_per_node > 1), one rank order per GPU offset, each node's
// ranks rotated by it, so that every channel leaves and enters the nodes through other GPUs' NICs; else
// the ranks alone (allreduce_ring.cpp).
std::vector<std::vector<int>> rail_channels(const World& world, const std::vector<int>& ranks);
}  // namespace coll

}  // namespace dtsim::sim

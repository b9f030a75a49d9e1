// Internal to sim/: one simulated world per process: the SimGrid engine, the platform built from a
// platforms::Platform (node-major rank order), and just-in-time activities with completion callbacks.
// Used by the standalone comm patterns (comm.cpp) and by the training replay (training.cpp).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "platforms/platform.hpp"
#include "sim/comm.hpp"

namespace simgrid::s4u {
class Host;
}

namespace dtsim::sim {

struct Layout {
  int nodes = 1;
  int workers_per_node = 1;
  int dedicated_ps_nodes = 0;  // extra nodes holding parameter servers (PsPlacement::DEDICATED)
};

class World {
 public:
  World(const platforms::Platform& platform, const Layout& layout);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int workers() const;
  int node_of(int rank) const;
  simgrid::s4u::Host* worker_host(int rank) const;     // rank order is node-major
  simgrid::s4u::Host* node_host(int node) const;       // the node's CPU/NIC-side host (servers, I/O)
  simgrid::s4u::Host* dedicated_ps_host(int i) const;
  simgrid::s4u::Host* storage_host() const;            // parallel file system / local SSD model

  // Busy-waits `rank`'s device for `seconds`, then calls done.
  void compute(int rank, double seconds, std::function<void()> done);
  // Any host to host: one flow of `bytes`, then done (latency and sharing by SimGrid).
  void transfer(simgrid::s4u::Host* src, simgrid::s4u::Host* dst, double bytes, std::function<void()> done);
  // Calls fn at simulated time now()+delay.
  void after(double delay_s, std::function<void()> fn);
  double now() const;
  void run();  // until no activity is left

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Collectives as callback-driven operations on a World; `ranks` are worker ranks.
// Coarse mode merges identical steps into fewer flows and adds step latencies in closed form.
void start_allreduce(World& world, CommPattern algorithm, const std::vector<int>& ranks, double bytes,
                     CommMode mode, std::function<void()> done);
void start_broadcast(World& world, int root, const std::vector<int>& ranks, double bytes, CommMode mode,
                     std::function<void()> done);

}  // namespace dtsim::sim

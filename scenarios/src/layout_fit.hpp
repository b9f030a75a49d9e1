// The checks and memory estimate `dtsim predict` runs on a transformer layout before simulating it,
// without simulating, and the bound on its iteration time: what `dtsim plan` filters and orders its
// candidates with. Private to scenarios/src.
#pragma once
#include <memory>
#include <vector>

#include "scenarios/scenario.hpp"
#include "sim/training.hpp"

namespace dtsim::scenarios {

// What the candidates of one search share, built once and reused: the platform, the model of each shard
// (tensor/context/expert parallelism, micro-batch) with its compute profile, the unsharded model. A
// forked child (a simulated candidate) reuses what the parent built before the fork.
class LayoutCache {
 public:
  LayoutCache();
  ~LayoutCache();
  LayoutCache(const LayoutCache&) = delete;
  LayoutCache& operator=(const LayoutCache&) = delete;
  struct Impl;
  Impl* impl() { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

struct LayoutFit {
  double memory_B = 0;    // the fullest rank's estimate (weights, gradients, optimizer, activations)
  double capacity_B = 0;  // the GPU's memory; 0 when predict does not check it (CPU devices, oversubscribe)
};

// The scenario's first workers entry on its layout: InputError as predict gives for a layout it cannot
// run (tp not dividing heads, batches, stages ...); otherwise the fullest rank's memory and the limit.
LayoutFit layout_fit(const Scenario& s, LayoutCache* cache = nullptr);

// Seconds the simulated iteration (global batch / throughput) of the scenario's first workers entry
// cannot beat (sim/layout_bound.hpp); 0 where no bound holds (jitter, an anchored profile).
double layout_lower_bound_s(const Scenario& s, LayoutCache& cache);

// predict_scenario(s) with the cache's platform, models and profiles: the same rows.
std::vector<sim::PointResult> predict_layout(const Scenario& s, LayoutCache& cache);

}  // namespace dtsim::scenarios

// `dtsim plan`: the search for a transformer's best parallel layout on a number of GPUs
// (docs/layout-search.md). Enumerates tp, pp, vp, cp, ep, micro-batch, ZeRO stage and recomputation,
// drops the layouts that break a constraint or do not fit in memory (predict's own checks and memory
// estimate), simulates the rest as a sweep (parallel, resumable, split across MPI ranks) in increasing
// order of a bound on their iteration, leaving out those the top N beat (exact), and ranks them.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"
#include "sim/training.hpp"

namespace dtsim::scenarios {

// How the layouts are enumerated (docs/layout-search.md "Space").
struct PlanSpace {
  int max_micro_batch = 8;       // micro-batches among the divisors of a replica's sequences, up to this
  int max_vp = 4;                // virtual stages per pipeline rank tried with pp > 1
  int max_cp = 8;                // context parallelism among the divisors of the GPUs, up to this
  bool tp_within_node = true;    // tensor parallelism among the divisors of the GPUs per node
};

// One layout of the search: the base scenario with its layout fields and micro-batch replaced.
struct PlanCandidate {
  sim::ParallelLayout layout;
  int micro_batch = 1;
  std::string key() const;  // "tp=2;pp=4;vp=1;cp=1;ep=1;mb=1;zero=1;recompute=selective"
};

// What the enumeration found: every candidate kept, and the dropped ones counted by reason (the
// first line of predict's InputError with the numbers taken out, or "does not fit in memory").
struct PlanEnumeration {
  std::size_t enumerated = 0;
  std::vector<PlanCandidate> fitting;
  std::vector<double> fitting_memory_B;      // the fullest rank's estimate, one per fitting candidate
  // A bound the candidate's simulated iteration time cannot beat (sim/layout_bound.hpp), one per fitting
  // candidate; 0 where none holds.
  std::vector<double> fitting_bound_s;
  std::map<std::string, std::size_t> dropped;  // reason -> count
  double capacity_B = 0;                     // the device's memory
};

// Enumerates the layouts of `base` (a transformer; one workers entry = the GPUs; global_batch > 0),
// checks and bounds each without simulating. InputError for a base the search cannot run (no transformer, several
// workers entries, no global batch).
PlanEnumeration enumerate_layouts(const Scenario& base, const PlanSpace& space);

// `base` with the candidate's layout (sequence parallelism on when tp > 1) and micro-batch.
Scenario apply_candidate(const Scenario& base, const PlanCandidate& candidate);

struct PlanOptions {
  PlanSpace space;
  int jobs = 1;
  // Layouts simulated at most (per process): InputError naming --max-candidates when more could still
  // be among the fastest (with prune) or when more fit (without).
  std::size_t max_candidates = 2000;
  std::size_t top = 10;  // N: the search is exact for the N fastest
  // Branch and bound: candidates simulated in increasing order of their bound, and those whose bound the
  // N-th fastest simulated beats left out (docs/layout-search.md). false: every fitting layout simulated.
  bool prune = true;
  std::string out_dir;                // results.jsonl + results.csv of the simulated layouts (resumable)
  bool progress = true;
};

struct PlanRow {
  PlanCandidate candidate;
  sim::PointResult result;  // tokens_per_s, mfu, memory_per_device_B, breakdown ...
  double bound_s = 0;       // the bound its job iteration (global batch / throughput) could not beat
};

struct PlanSummary {
  PlanEnumeration enumeration;
  std::size_t simulated = 0, skipped = 0, failed = 0;  // run now, already in out_dir, recorded with an error
  std::size_t pruned = 0;  // fitting layouts left unsimulated because the N-th fastest beats their bound
  bool interrupted = false;
  int mpi_rank = 0;
  std::vector<PlanRow> ranked;  // every simulated layout, fastest (tokens/s) first (rank 0 under MPI)
  std::string jsonl_path;
};

// Enumerates and filters the layouts of `base` and simulates, in increasing order of their bound, those
// that can still be among the options.top fastest (all with !options.prune); fastest first.
PlanSummary run_plan(const Scenario& base, const PlanOptions& options);

// Why the best layout wins, in words: its bubble, local (tensor/context/expert) collectives, exposed
// data-parallel communication and recomputation beside the runner-up's.
std::string plan_reason(const std::vector<PlanRow>& ranked);

}  // namespace dtsim::scenarios

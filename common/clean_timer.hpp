// A disturbance-checked timer for a shared machine: warm-up, blocks of repeats, median per block, and
// a block kept only when the process's own CPU time (getrusage) and the machine's busy time
// (/proc/stat) show nobody else ran during it. Method and thresholds: docs/calibration.md.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace dtsim {

struct CleanTimerOptions {
  int threads = 1;                  // threads the timed work keeps busy (for the own-CPU check)
  int warmup = 1;                   // untimed runs before the first block
  int blocks = 3;                   // clean blocks wanted
  int max_blocks = 9;               // blocks tried at most (clean + rejected) before giving up
  double min_block_s = 0.05;        // repeats per block are chosen so a block lasts at least this
  int min_repeats = 1;              // repeats per block, lower bound
  int max_repeats = 100;            // repeats per block, upper bound
  double min_own_cpu_ratio = 0.9;   // own CPU time / (wall x threads) at least this
  double max_other_busy_fraction = 0.15;  // other processes' CPU time / (wall x online CPUs) below this
  bool check_disturbance = true;    // false: every block counts as clean (tests, non-CPU work)
  // Time each repeat by this process's CPU time instead of wall time. Only meaningful for
  // single-threaded work; a diagnostic for busy machines (waiting for the CPU is not counted).
  bool cpu_time = false;
};

struct BlockSample {
  int repeats = 0;
  double median_s = 0;              // median of the repeats of this block
  double wall_s = 0;                // wall time of the whole block
  double own_cpu_ratio = 0;         // own CPU time / (wall x threads)
  double other_busy_fraction = 0;   // others' busy time / (wall x CPUs), after tick quantisation
  bool clean = false;
};

struct TimingResult {
  double median_s = 0;      // median of the clean blocks' medians; 0 when no block was clean
  double spread = 0;        // (max - min) / median over the clean blocks' medians
  int blocks_kept = 0;
  int blocks_rejected = 0;
  std::vector<BlockSample> blocks;  // every block tried, in order
  bool clean() const { return blocks_kept > 0; }
};

// Times several pieces of work interleaved, as the layers of a training step run: each round runs,
// in order, every piece that still needs a repeat, `before_each(i)` (untimed) first, so every piece
// finds the caches, TLBs and branch predictors the others left. Piece i's repeats per block are
// sized from its own warm-up time (min_block_s, min/max_repeats); a block's disturbance check covers
// all pieces, so they are kept or rejected together. One result per piece, in order.
std::vector<TimingResult> time_clean_interleaved(const std::vector<std::function<void()>>& works,
                                                 const CleanTimerOptions& options = {},
                                                 const std::function<void(std::size_t)>& before_each = {});

// Times `work` alone (one call = one repeat). `before_each`, when given, runs before every repeat (warm-up
// included) outside the timed region, e.g. to evict caches. Throws InputError on nonsensical options.
TimingResult time_clean(const std::function<void()>& work, const CleanTimerOptions& options = {},
                        const std::function<void()>& before_each = {});

// CPU time (user + system) of this whole process, all threads, in seconds.
double process_cpu_s();

// Machine-wide busy time (all CPUs, including steal) from /proc/stat, seconds; -1 if unreadable.
double machine_busy_s();

// Online CPUs of the machine.
int online_cpus();

}  // namespace dtsim

// Disturbance-checked timing: per block, compare the process's own CPU time with wall x threads and
// the machine's busy time (/proc/stat) with our own, and keep only blocks that ran undisturbed.
#include "common/clean_timer.hpp"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "common/errors.hpp"

namespace dtsim {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

double clock_tick_s() {
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? 1.0 / static_cast<double>(ticks) : 0.01;
}

void check_options(const CleanTimerOptions& o) {
  auto bad = [](const char* field, const std::string& expected) {
    throw InputError(fmt::format("clean timer: option '{}' must be {}", field, expected));
  };
  if (o.threads < 1 || o.threads > 4096) bad("threads", "in 1..4096");
  if (o.cpu_time && o.threads != 1) bad("cpu_time", "used with threads = 1 only");
  if (o.warmup < 0 || o.warmup > 1000) bad("warmup", "in 0..1000");
  if (o.blocks < 1 || o.blocks > 1000) bad("blocks", "in 1..1000");
  if (o.max_blocks < o.blocks || o.max_blocks > 10000) bad("max_blocks", "in blocks..10000");
  if (!(o.min_block_s >= 0) || o.min_block_s > 3600) bad("min_block_s", "in 0..3600 s");
  if (o.min_repeats < 1 || o.max_repeats < o.min_repeats || o.max_repeats > 1000000)
    bad("min_repeats/max_repeats", "1 <= min_repeats <= max_repeats <= 1e6");
  if (!(o.min_own_cpu_ratio >= 0 && o.min_own_cpu_ratio <= 1)) bad("min_own_cpu_ratio", "in 0..1");
  if (!(o.max_other_busy_fraction > 0 && o.max_other_busy_fraction <= 1))
    bad("max_other_busy_fraction", "in (0, 1]");
}

}  // namespace

// CLOCK_PROCESS_CPUTIME_ID, not getrusage: getrusage splits the runtime into user and system time by
// tick samples and scales them, and here it stood still and then jumped by up to 1.4 ms (a loop reading
// it for 0.2 s, five times: largest steps 0.09-1.4 ms), where the clock's largest step was 0.11-0.13 ms.
// Both count interrupt time against the process, so a few-millisecond reading can still be ~1 ms off.
double process_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double machine_busy_s() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("cpu ", 0) != 0) return -1;
  std::istringstream fields(line.substr(4));
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  double v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (double& x : v) {
    if (!(fields >> x)) break;
  }
  const double busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return busy_ticks * clock_tick_s();
}

int online_cpus() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<TimingResult> time_clean_interleaved(const std::vector<std::function<void()>>& works,
                                                 const CleanTimerOptions& options,
                                                 const std::function<void(std::size_t)>& before_each) {
  check_options(options);
  const std::size_t n = works.size();
  const int cpus = online_cpus();
  // /proc/stat counts in clock ticks per CPU: forgive one tick per CPU of quantisation per block.
  const double tick_allowance_s = clock_tick_s() * cpus;

  const auto run_one = [&](std::size_t i) {
    if (before_each) before_each(i);
    const auto start = Clock::now();
    const double cpu_start = options.cpu_time ? process_cpu_s() : 0.0;
    works[i]();
    return options.cpu_time ? process_cpu_s() - cpu_start : seconds_since(start);
  };

  // Warm-up rounds, and a first estimate of each piece's time to size its repeats per block.
  std::vector<double> one_s(n, 0.0);
  for (int w = 0; w < std::max(options.warmup, 1); ++w)
    for (std::size_t i = 0; i < n; ++i) one_s[i] = run_one(i);
  std::vector<int> repeats(n, options.min_repeats);
  int rounds = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (one_s[i] > 0 && options.min_block_s > 0)
      repeats[i] = static_cast<int>(std::ceil(options.min_block_s / one_s[i]));
    repeats[i] = std::clamp(repeats[i], options.min_repeats, options.max_repeats);
    rounds = std::max(rounds, repeats[i]);
  }

  std::vector<TimingResult> results(n);
  std::vector<std::vector<double>> kept(n);
  std::vector<std::vector<double>> times(n);
  int blocks_kept = 0;
  for (int b = 0; b < options.max_blocks && blocks_kept < options.blocks; ++b) {
    for (auto& t : times) t.clear();
    const double busy0 = machine_busy_s();
    const double cpu0 = process_cpu_s();
    const auto block_start = Clock::now();
    // Round r runs, in order, every piece that still needs a repeat: each finds what the others left.
    for (int r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < n; ++i)
        if (r < repeats[i]) times[i].push_back(run_one(i));
    BlockSample block;
    block.wall_s = seconds_since(block_start);
    const double own_s = process_cpu_s() - cpu0;
    const double busy1 = machine_busy_s();
    block.own_cpu_ratio = block.wall_s > 0 ? own_s / (block.wall_s * options.threads) : 0;
    if (busy0 >= 0 && busy1 >= 0 && block.wall_s > 0) {
      const double other_s = std::max(0.0, (busy1 - busy0) - own_s - tick_allowance_s);
      block.other_busy_fraction = other_s / (block.wall_s * cpus);
    }
    block.clean = !options.check_disturbance ||
                  (block.own_cpu_ratio >= options.min_own_cpu_ratio &&
                   block.other_busy_fraction < options.max_other_busy_fraction);
    if (block.clean) ++blocks_kept;
    for (std::size_t i = 0; i < n; ++i) {
      BlockSample piece = block;
      piece.repeats = repeats[i];
      piece.median_s = median_of(times[i]);
      if (block.clean) {
        ++results[i].blocks_kept;
        kept[i].push_back(piece.median_s);
      } else {
        ++results[i].blocks_rejected;
      }
      results[i].blocks.push_back(piece);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (kept[i].empty()) continue;
    results[i].median_s = median_of(kept[i]);
    const auto [lo, hi] = std::minmax_element(kept[i].begin(), kept[i].end());
    results[i].spread = results[i].median_s > 0 ? (*hi - *lo) / results[i].median_s : 0;
  }
  return results;
}

TimingResult time_clean(const std::function<void()>& work, const CleanTimerOptions& options,
                        const std::function<void()>& before_each) {
  std::function<void(std::size_t)> before;
  if (before_each) before = [&](std::size_t) { before_each(); };
  return time_clean_interleaved({work}, options, before).front();
}

}  // namespace dtsim

// What the standalone host microbenchmarks (page_fault_cost.cpp, copy_bandwidth.cpp) share: this process's CPU
// time, a timing of wall and CPU time, a parallel loop over [0, n) split in contiguous shares as an intra-op
// parallel loop splits a tensor, and the median of repeats. CPU time is the figure to trust on a shared machine
// (docs/HOST-NOTES: own CPU time); wall time only on a quiet one.
#pragma once
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

namespace bench {

// User + system CPU time of this process, all its threads (s).
inline double cpu_s() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

struct Timing {
  double wall_s = 0;
  double cpu_s = 0;
};

// Runs kernel(begin, end) over [0, n) split in `threads` contiguous shares, one thread each.
template <typename Kernel>
Timing run_split(std::size_t n, int threads, Kernel kernel) {
  const double c0 = cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  const std::size_t share = n / static_cast<std::size_t>(threads);
  for (int t = 0; t < threads; ++t) {
    const std::size_t begin = static_cast<std::size_t>(t) * share;
    const std::size_t end = t + 1 == threads ? n : begin + share;
    pool.emplace_back([=] { kernel(begin, end); });
  }
  for (auto& th : pool) th.join();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), cpu_s() - c0};
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace bench

// Memory copy bandwidth of this machine, STREAM-style (issue 40): the rate at which T threads copy one
// array into another (memcpy, STREAM's Copy) and write a scaled copy (b = s * a, STREAM's Scale, which is
// what PyTorch DDP's reducer does when it copies a gradient into its bucket: at::mul_out by 1 / world
// size). Each thread copies its own contiguous share, as an intra-op parallel loop does; the arrays are
// written before timing so no page fault is timed. Bandwidth counts each copied byte read once and written
// once (2 x bytes per copy, STREAM's convention and dtsim's COPY_TRAFFIC_PER_BYTE); the per-core figure is
// the total over T. Prints the median over repeats, with this process's CPU time over (wall x T): below 0.9
// another process took the cores and the figure is not clean (docs/HOST-NOTES: own CPU time).
// Build and run: benchmarks/copy_bandwidth.sh (g++ -O3 -march=native -pthread; shares bench_threads.hpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_threads.hpp"

using bench::median;
using bench::run_split;
using bench::Timing;

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 7;
  if (mib == 0 || threads < 1 || repeats < 1) {
    std::fprintf(stderr, "usage: copy_bandwidth [MiB per array > 0] [threads >= 1] [repeats >= 1]\n");
    return 2;
  }
  const std::size_t bytes = mib << 20;
  const std::size_t n = bytes / sizeof(float);
  std::vector<float> a(n), b(n);
  // Resident pages on every thread's share first (the vectors' zeroing has faulted them in).
  run_split(n, threads, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) a[i] = static_cast<float>(i & 1023);
  });
  const float scale = 0.5F;
  std::vector<double> copy_Bps, scale_Bps, copy_busy, scale_busy;
  for (int r = 0; r < repeats; ++r) {
    const Timing c = run_split(n, threads, [&](std::size_t i0, std::size_t i1) {
      std::memcpy(b.data() + i0, a.data() + i0, (i1 - i0) * sizeof(float));
    });
    const Timing s = run_split(n, threads, [&](std::size_t i0, std::size_t i1) {
      const float* __restrict src = a.data();
      float* __restrict dst = b.data();
      for (std::size_t i = i0; i < i1; ++i) dst[i] = scale * src[i];  // vectorised, as ATen's mul kernel is
    });
    copy_Bps.push_back(2.0 * static_cast<double>(bytes) / c.wall_s);
    scale_Bps.push_back(2.0 * static_cast<double>(bytes) / s.wall_s);
    copy_busy.push_back(c.cpu_s / (c.wall_s * threads));
    scale_busy.push_back(s.cpu_s / (s.wall_s * threads));
  }
  // Keep the result live so the compiler cannot drop the scale loop.
  volatile float sink = b[n / 2];
  (void)sink;
  const double copy = median(copy_Bps), scaled = median(scale_Bps);
  std::printf(
      "arrays %zu MiB, %d thread(s), %d repeats | copy %.1f GB/s (%.1f per core, CPU/wall %.2f) | scale %.1f GB/s "
      "(%.1f per core, CPU/wall %.2f)\n",
      mib, threads, repeats, copy / 1e9, copy / threads / 1e9, median(copy_busy), scaled / 1e9,
      scaled / threads / 1e9, median(scale_busy));
  return 0;
}

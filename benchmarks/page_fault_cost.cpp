// Page-fault cost microbenchmark (issue 40): the time to fault in fresh anonymous memory, as a training
// step pays when its allocator hands it pages the kernel must map and zero (glibc above its mmap
// threshold, or after a trim). Each repeat maps a region, touches it with T threads (each thread its own
// contiguous share, as an OpenMP loop writing a tensor does), and unmaps it; the same loop over resident
// memory is timed too, so fault cost = fresh - resident. Prints the medians per 4 KiB page, by wall time and
// by this process's CPU time (user + system, summed over threads): on a shared machine the CPU time is the
// figure to trust, the wall time only when the machine is quiet.
// Build and run: benchmarks/page_fault_cost.sh (g++ -O2 -pthread; shares bench_threads.hpp).
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_threads.hpp"

namespace {

using bench::median;
using bench::Timing;

// Writes the whole region (memset, as a kernel writing its output does) with `threads` threads.
Timing touch(char* base, std::size_t bytes, int threads) {
  return bench::run_split(bytes, threads, [=](std::size_t b, std::size_t e) { std::memset(base + b, 1, e - b); });
}

long minor_faults() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 21;
  const std::size_t bytes = mib << 20;
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const double pages = static_cast<double>(bytes / page);
  std::vector<double> fresh, resident, fresh_cpu, resident_cpu, faults;
  for (int r = 0; r < repeats; ++r) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      return 1;
    }
    auto* base = static_cast<char*>(p);
    const long f0 = minor_faults();
    const Timing f = touch(base, bytes, threads);
    faults.push_back(static_cast<double>(minor_faults() - f0));
    const Timing again = touch(base, bytes, threads);
    fresh.push_back(f.wall_s);
    fresh_cpu.push_back(f.cpu_s);
    resident.push_back(again.wall_s);
    resident_cpu.push_back(again.cpu_s);
    munmap(p, bytes);
  }
  const double fresh_s = median(fresh), resident_s = median(resident);
  const double fresh_cpu_s = median(fresh_cpu), resident_cpu_s = median(resident_cpu);
  std::printf(
      "region %zu MiB, %d thread(s), %d repeats, page %zu B, faults per page %.3f | wall: fresh %.3f, "
      "resident %.3f, fault %.3f us/page | CPU: fresh %.3f, resident %.3f, fault %.3f us/page\n",
      mib, threads, repeats, page, median(faults) / pages, fresh_s / pages * 1e6, resident_s / pages * 1e6,
      (fresh_s - resident_s) / pages * 1e6, fresh_cpu_s / pages * 1e6, resident_cpu_s / pages * 1e6,
      (fresh_cpu_s - resident_cpu_s) / pages * 1e6);
  return 0;
}

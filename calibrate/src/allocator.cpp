// The allocator regime table (calibrate/allocator.hpp).
#include "calibrate/allocator.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

// glibc's ceiling of the dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, glibc
// malloc/malloc.c) and twice it for the trim threshold, the ratio glibc keeps when it raises them
// (mallopt(3)): a heap held at these keeps every block up to 32 MiB and never returns its top.
constexpr const char* GLIBC_HELD_MMAP_THRESHOLD_B = "33554432";
constexpr const char* GLIBC_HELD_TRIM_THRESHOLD_B = "67108864";
// Debian 12's shared objects of the two allocators (packages libjemalloc2 5.3.0, libtcmalloc-minimal4 2.10).
constexpr const char* JEMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
constexpr const char* TCMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";

std::vector<AllocatorRegime> make_regimes() {
  return {
      {"glibc",
       "glibc malloc with its defaults, what a plain script gets: a block above the dynamic mmap threshold "
       "is "
       "mapped, faulted in and unmapped every time it is allocated",
       {},
       "",
       ""},
      {"glibc-held",
       "glibc malloc held steady (MALLOC_MMAP_THRESHOLD_=32 MiB, MALLOC_TRIM_THRESHOLD_=64 MiB): blocks up "
       "to "
       "32 MiB reuse heap memory, no page faults in a step",
       {{"MALLOC_MMAP_THRESHOLD_", GLIBC_HELD_MMAP_THRESHOLD_B},
        {"MALLOC_TRIM_THRESHOLD_", GLIBC_HELD_TRIM_THRESHOLD_B}},
       "",
       ""},
      {"jemalloc",
       "jemalloc 5.3 through LD_PRELOAD (Debian libjemalloc2)",
       {{"LD_PRELOAD", JEMALLOC_SO}},
       JEMALLOC_SO,
       "libjemalloc2"},
      {"tcmalloc",
       "tcmalloc 2.10 (gperftools, minimal) through LD_PRELOAD (Debian libtcmalloc-minimal4)",
       {{"LD_PRELOAD", TCMALLOC_SO}},
       TCMALLOC_SO,
       "libtcmalloc-minimal4"},
  };
}

}  // namespace

const std::vector<AllocatorRegime>& allocator_regimes() {
  static const std::vector<AllocatorRegime> rows = make_regimes();
  return rows;
}

const AllocatorRegime* allocator_or_null(const std::string& name) {
  for (const auto& r : allocator_regimes())
    if (r.name == name) return &r;
  return nullptr;
}

std::string allocator_names() {
  std::string names;
  for (const auto& r : allocator_regimes()) names += (names.empty() ? "" : ", ") + r.name;
  return names;
}

const AllocatorRegime& allocator_by_name(const std::string& name, const std::string& what) {
  if (const AllocatorRegime* r = allocator_or_null(name)) return *r;
  throw InputError(
      fmt::format("{}: unknown allocator '{}'; expected one of: {}", what, name, allocator_names()));
}

std::string allocator_help() {
  std::string out;
  for (const auto& r : allocator_regimes())
    out += fmt::format("{}{}: {}", out.empty() ? "" : "\n", r.name, r.description);
  return out;
}

bool allocator_loaded(const AllocatorRegime& regime) {
  if (regime.preload.empty()) return true;
  // A preloaded allocator's malloc is the first in the search order: it comes from its own object.
  Dl_info info{};
  void* malloc_sym = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_sym == nullptr || dladdr(malloc_sym, &info) == 0 || info.dli_fname == nullptr) return false;
  return std::string(info.dli_fname) == regime.preload;
}

}  // namespace dtsim::calibrate

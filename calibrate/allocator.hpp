// The heap regimes a training process can run in (glibc's default, a held glibc heap, jemalloc,
// tcmalloc): one row each, with how a process is put in it. An eager framework allocates each op's outputs
// with malloc, so the regime decides which of a step's blocks are faulted in afresh every step; the libtorch
// calibrator times passes in the regime asked (docs/calibration.md, "The heap a pass runs in").
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim::calibrate {

struct AllocatorRegime {
  std::string name;         // "glibc", "glibc-held", ...
  std::string description;  // one line, for --help and docs
  // Environment a process is started with to run in this regime (NAME, value); LD_PRELOAD included.
  std::vector<std::pair<std::string, std::string>> env;
  std::string preload;  // the library LD_PRELOAD must load ("" = glibc's own malloc)
  std::string package;  // the Debian package that ships `preload` ("" for glibc)
};

// What a plain script gets: glibc's malloc with its defaults.
inline constexpr const char* DEFAULT_ALLOCATOR = "glibc";

// Every regime, default first.
const std::vector<AllocatorRegime>& allocator_regimes();
// The row named `name`; InputError "WHAT: unknown allocator 'x'; expected one of: ..." otherwise.
const AllocatorRegime& allocator_by_name(const std::string& name, const std::string& what = "--allocator");
// The row named `name`, or null.
const AllocatorRegime* allocator_or_null(const std::string& name);
// "glibc, glibc-held, ...".
std::string allocator_names();
// "glibc: ...\nglibc-held: ..." for --help.
std::string allocator_help();
// Whether this process runs in `regime` now: its preloaded allocator is the one serving malloc (always
// true for the glibc rows, whose state the calibrator sets itself).
bool allocator_loaded(const AllocatorRegime& regime);

}  // namespace dtsim::calibrate

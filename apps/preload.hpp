// Running a command under a preloaded allocator (jemalloc, tcmalloc): LD_PRELOAD takes effect only when a
// process starts, so a command asked to calibrate in such a regime starts itself again with it set.
#pragma once
#include "calibrate/allocator.hpp"

namespace dtsim::apps {

// Returns when this process's malloc is `regime`'s (always for the glibc rows); otherwise replaces this
// process by the same command line with LD_PRELOAD set to the regime's library. InputError naming
// `flag` when the library is not installed or the restarted process still does not run it.
void run_under_allocator(const calibrate::AllocatorRegime& regime, const char* flag = "--allocator");

}  // namespace dtsim::apps

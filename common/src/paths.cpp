// Data-directory lookup: one place decides where shipped files live.
#include "common/paths.hpp"

#include <cstdlib>

namespace dtsim {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("DTSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return DTSIM_SOURCE_DATA_DIR;
}

std::filesystem::path reference_dir() {
  if (const char* env = std::getenv("DTSIM_REFERENCE_DIR"); env != nullptr && *env != '\0') return env;
  return (data_dir() / ".." / "shared" / "reference").lexically_normal();
}

}  // namespace dtsim

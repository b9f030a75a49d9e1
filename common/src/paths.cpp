// Data-directory lookup: one place decides where shipped files live.
#include "common/paths.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <system_error>

#include "common/errors.hpp"

namespace dtsim {
namespace {

namespace fs = std::filesystem;

// A data root holds at least the device catalog; an install without it is not one.
bool is_data_root(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "platforms" / "devices.yaml", ec);
}

}  // namespace

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

fs::path installed_data_dir() {
  const fs::path bin = executable_dir();
  if (bin.empty()) return {};
  const fs::path share = (bin / DTSIM_INSTALL_BIN_TO_DATA).lexically_normal();
  return is_data_root(share) ? share : fs::path();
}

fs::path data_dir() {
  if (const char* env = std::getenv("DTSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
  if (fs::path installed = installed_data_dir(); !installed.empty()) return installed;
  return DTSIM_SOURCE_DATA_DIR;
}

std::string replaceable_data_file(const char* env_name, const fs::path& shipped) {
  if (const char* env = std::getenv(env_name); env != nullptr && *env != '\0') return env;
  return (data_dir() / shipped).string();
}

bool replaceable_data_file_exists(const std::string& path, const char* env_name) {
  std::error_code ec;
  if (fs::exists(path, ec)) return true;
  if (const char* env = std::getenv(env_name); env != nullptr && *env != '\0')
    throw InputError(fmt::format("${}: no such file '{}'", env_name, path));
  return false;
}

fs::path reference_dir() {
  if (const char* env = std::getenv("DTSIM_REFERENCE_DIR"); env != nullptr && *env != '\0') return env;
  return data_dir() / "benchmarks" / "data";
}

}  // namespace dtsim

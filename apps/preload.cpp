// run_under_allocator (apps/preload.hpp): re-executes /proc/self/exe with the same arguments and LD_PRELOAD.
#include "apps/preload.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/errors.hpp"

namespace dtsim::apps {

void run_under_allocator(const calibrate::AllocatorRegime& regime, const char* flag) {
  if (calibrate::allocator_loaded(regime)) return;
  std::error_code ec;
  if (!std::filesystem::exists(regime.preload, ec))
    throw InputError(fmt::format("{} {}: {} is not installed (Debian package {}, scripts/install-deps.sh)",
                                 flag, regime.name, regime.preload, regime.package));
  const char* current = std::getenv("LD_PRELOAD");
  if (current != nullptr && std::string(current).find(regime.preload) != std::string::npos)
    throw InputError(
        fmt::format("{} {}: LD_PRELOAD={} is set but malloc is not served by {} (another preloaded "
                    "library comes first?)",
                    flag, regime.name, current, regime.preload));
  // The command line as this process got it: NUL-separated in /proc/self/cmdline.
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\0', at);
    args.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (args.empty()) throw Failure("cannot read this process's command line (/proc/self/cmdline)");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string preload =
      current != nullptr && *current != '\0' ? regime.preload + ":" + current : regime.preload;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::execv("/proc/self/exe", argv.data());
  throw Failure(fmt::format("{} {}: cannot restart dtsim with LD_PRELOAD={}: {}", flag, regime.name, preload,
                            std::strerror(errno)));
}

}  // namespace dtsim::apps

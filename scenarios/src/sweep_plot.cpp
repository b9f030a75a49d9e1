// Plotting bridge: dtsim's C++ side hands a results file or a trace to the Python plotting scripts in plots/.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/errors.hpp"
#include "common/paths.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {

namespace {
// Runs plots/<script_name> on `input`; returns what it printed (the paths written).
std::string run_plot_script(const std::string& script_name, const std::string& results, const std::string& out_dir,
                            const std::vector<std::string>& extra) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("DTSIM_PYTHON");
  const std::string python = (env != nullptr && *env != '\0') ? env : "/usr/bin/python3";
  const fs::path script = data_dir() / "plots" / script_name;
  if (!fs::is_regular_file(script)) throw Failure(fmt::format("{}: plotting script not found", script.string()));
  std::vector<std::string> args = {python, script.string(), results, "--out", out_dir};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Failure(fmt::format("pipe failed: {}", std::strerror(errno)));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Failure(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::setenv("MPLBACKEND", "Agg", 1);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "dtsim: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 2) throw InputError(fmt::format("{}: the plotting script rejected the results (see above)", results));
    throw Failure(fmt::format("plotting script {} failed with exit code {} (python: {}; set DTSIM_PYTHON to a "
                              "Python with matplotlib)", script.string(), code, python));
  }
  return out;
}
}  // namespace

std::string run_plots(const std::string& results, const std::string& out_dir, const std::vector<std::string>& extra) {
  if (!std::filesystem::exists(results))
    throw InputError(fmt::format("{}: no such results file or directory", results));
  return run_plot_script("plot_results.py", results, out_dir, extra);
}

std::string run_timeline_plot(const std::string& trace, const std::string& out_dir,
                              const std::vector<std::string>& extra) {
  if (!std::filesystem::is_regular_file(trace))
    throw InputError(fmt::format("{}: no such trace file (write one with dtsim predict --trace FILE)", trace));
  return run_plot_script("plot_timeline.py", trace, out_dir, extra);
}

}  // namespace dtsim::scenarios

// Starting dtsim-train under mpirun: the command line a root user on a small machine needs, a
// process-group watchdog so a hung or half-dead job can never hang dtsim, and one-line failure reasons.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/errors.hpp"
#include "validate/validate.hpp"

namespace dtsim::validate {
namespace {

// How often the watchdog polls the child, and the grace between SIGTERM and SIGKILL of the group.
constexpr auto POLL_INTERVAL = std::chrono::milliseconds(20);
constexpr double KILL_GRACE_S = 2.0;

std::string mpiexec_path() {
  if (const char* env = std::getenv("DTSIM_MPIEXEC"); env && *env) return env;
#ifdef DTSIM_MPIEXEC
  if (std::string(DTSIM_MPIEXEC).size() > 0) return DTSIM_MPIEXEC;
#endif
  return "mpirun";
}

}  // namespace

std::string trainer_path() {
  if (const char* env = std::getenv("DTSIM_TRAIN"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto candidate = self.parent_path() / "dtsim-train";
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  throw Failure("dtsim-train not found next to the running executable (build the dtsim-train target, or set DTSIM_TRAIN)");
}

std::vector<std::string> mpirun_command(int ranks, int threads, const std::vector<std::string>& trainer_args) {
  if (ranks < 1) throw InputError(fmt::format("--ranks: every entry must be >= 1, got {}", ranks));
  if (threads < 1) throw InputError(fmt::format("--threads must be >= 1, got {}", threads));
  std::vector<std::string> cmd{mpiexec_path()};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  // More ranks than cores is allowed; binding is left to the OS so threads can use every core.
  for (const char* a : {"--oversubscribe", "--bind-to", "none", "-np"}) cmd.push_back(a);
  cmd.push_back(std::to_string(ranks));
  cmd.push_back("-x");
  cmd.push_back(fmt::format("OMP_NUM_THREADS={}", threads));
  cmd.push_back(trainer_path());
  cmd.insert(cmd.end(), trainer_args.begin(), trainer_args.end());
  return cmd;
}

LaunchResult run_command(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) throw Failure("run_command: empty command");
  char tmpl[] = "/tmp/dtsim-launch-XXXXXX";
  const int out_fd = mkstemp(tmpl);
  if (out_fd < 0) throw Failure("run_command: cannot create a temporary file for the output");
  std::fflush(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out_fd);
    throw Failure("run_command: fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot execute %s\n", args[0]);
    _exit(127);
  }
  setpgid(pid, pid);
  LaunchResult result;
  int status = 0;
  bool term_sent = false;
  double term_at = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!term_sent && elapsed > timeout_s) {
      result.timed_out = true;
      kill(-pid, SIGTERM);
      term_sent = true;
      term_at = elapsed;
    } else if (term_sent && elapsed > term_at + KILL_GRACE_S) {
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(POLL_INTERVAL);
  }
  // Ranks left behind by a dead mpirun belong to the same group: make sure none survives.
  kill(-pid, SIGKILL);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  close(out_fd);
  std::ifstream f(tmpl);
  std::stringstream ss;
  ss << f.rdbuf();
  result.output = ss.str();
  std::filesystem::remove(tmpl);
  return result;
}

std::string launch_trainer(int ranks, int threads, const std::vector<std::string>& trainer_args, double timeout_s) {
  if (!(timeout_s > 0)) throw InputError(fmt::format("--timeout must be > 0 seconds, got {}", timeout_s));
  const auto cmd = mpirun_command(ranks, threads, trainer_args);
  const auto r = run_command(cmd, timeout_s);
  if (r.timed_out)
    throw Failure(fmt::format("training run with {} rank(s) did not finish within {:.0f} s and was killed", ranks,
                              timeout_s));
  if (r.exit_code == 0) return r.output;
  // The most specific line first: a dead rank, then the trainer's own error, then the exit code.
  std::smatch m;
  const std::regex dead(R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+) \(([^)]*)\))");
  if (std::regex_search(r.output, m, dead))
    throw Failure(fmt::format("training run with {} rank(s) failed: rank {} died (signal {}, {}); mpirun ended the job",
                              ranks, m[1].str(), m[2].str(), m[3].str()));
  const std::regex trainer_error(R"(dtsim-train: (error|failed)[^\n]*)");
  if (std::regex_search(r.output, m, trainer_error)) {
    if (m[1].str() == "error") throw InputError(m[0].str());
    throw Failure(fmt::format("training run with {} rank(s): {}", ranks, m[0].str()));
  }
  std::string last;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.find_first_not_of('-') != std::string::npos) last = line;
  throw Failure(fmt::format("training run with {} rank(s) failed: mpirun exit code {}: {}", ranks, r.exit_code, last));
}

}  // namespace dtsim::validate

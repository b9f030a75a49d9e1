// Test support: run the built `dtsim` binary with arguments and capture exit code, stdout and stderr.
// Every module's CLI tests use this one helper (DTSIM_BINARY is defined by tests/CMakeLists.txt).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dtsim::test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `DTSIM_BINARY args...` through the shell (arguments are single-quoted) with an optional
// working directory; stdout and stderr are captured through temporary files.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& cwd = "") {
  char out_path[] = "/tmp/dtsim_cli_outXXXXXX";
  char err_path[] = "/tmp/dtsim_cli_errXXXXXX";
  const int out_fd = ::mkstemp(out_path);
  const int err_fd = ::mkstemp(err_path);
  ::close(out_fd);
  ::close(err_fd);
  std::string cmd;
  if (!cwd.empty()) cmd += "cd '" + cwd + "' && ";
  cmd += "'" DTSIM_BINARY "'";
  for (const auto& a : args) {
    std::string quoted;
    for (char c : a) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    cmd += " '" + quoted + "'";
  }
  cmd += std::string(" >") + out_path + " 2>" + err_path + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const char* p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::remove(out_path);
  std::remove(err_path);
  return r;
}

}  // namespace dtsim::test

// Tests of common/child.hpp: results and errors cross the process boundary intact, one child or a pool.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/child.hpp"
#include "common/errors.hpp"

using namespace dtsim;

TEST_CASE("common::run_in_child: returns the child's text", "[common]") {
  CHECK(run_in_child([] { return std::string("hello\n") + std::string(100000, 'x'); }).size() == 100006);
}

TEST_CASE("common::run_in_child: InputError and Failure keep their type and message", "[common]") {
  CHECK_THROWS_AS(run_in_child([]() -> std::string { throw InputError("bad size"); }), InputError);
  CHECK_THROWS_WITH(run_in_child([]() -> std::string { throw Failure("broke"); }), "broke");
}

TEST_CASE("common::run_in_child: a crashed child is a Failure naming the signal", "[common]") {
  CHECK_THROWS_WITH(run_in_child([]() -> std::string {
                      std::raise(SIGSEGV);
                      return "";
                    }),
                    Catch::Contains("signal 11"));
}

namespace {
// Runs `fn` with this process's stderr sent to a temporary file; returns what was written there.
template <class Fn>
std::string own_stderr_during(Fn&& fn) {
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(capture), STDERR_FILENO);
  try {
    fn();
  } catch (...) {
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(capture);
  std::string text;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, capture)) > 0) text.append(buf, n);
  std::fclose(capture);
  return text;
}
}  // namespace

TEST_CASE("common::run_in_child: the child's stderr (SimGrid logs, backtraces) never reaches the user", "[common]") {
  const std::string leaked = own_stderr_during([] {
    CHECK_THROWS_WITH(run_in_child([]() -> std::string {
                        std::fputs("[0.000000] [ker_lmm/CRITICAL] Cannot saturate more a constraint\n"
                                   "Backtrace (displayed in actor maestro):\n  ->  16# main at apps/main.cpp:63\n",
                                   stderr);
                        std::fflush(stderr);
                        std::signal(SIGABRT, SIG_DFL);  // not Catch's handler: die as SimGrid's abort does
                        std::abort();
                      }),
                      "simulation child process died with signal 6 (Aborted): [0.000000] [ker_lmm/CRITICAL] "
                      "Cannot saturate more a constraint");
    CHECK_THROWS_WITH(run_in_child([]() -> std::string {
                        std::fputs("  ->  16# main at apps/main.cpp:63\n", stderr);
                        throw InputError("bad size");
                      }),
                      "bad size");
  });
  CHECK(leaked.empty());
}

TEST_CASE("common::run_process_pool: reports worker crashes and bad job counts", "[common]") {
  std::vector<std::string> errors;
  run_process_pool(
      2, 2,
      [](std::size_t i) -> std::string {
        if (i == 1) ::kill(::getpid(), SIGKILL);
        return "fine";
      },
      [&](std::size_t i, bool ok, const std::string& text) { errors.push_back(std::to_string(i) + (ok ? "+" : "-") + text); },
      [] { return false; });
  std::sort(errors.begin(), errors.end());
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] == "0+fine");
  CHECK(errors[1].find("1-worker process died with signal") == 0);
  CHECK_THROWS_AS(run_process_pool(1, 0, [](std::size_t) { return std::string(); },
                                   [](std::size_t, bool, const std::string&) {}, [] { return false; }),
                  InputError);
}

TEST_CASE("common::run_process_pool: runs every task once, at most `jobs` at a time, errors keep their kind",
          "[common]") {
  std::vector<std::string> seen(6);
  const std::size_t finished = run_process_pool(
      6, 3,
      [](std::size_t i) -> std::string {
        if (i == 4) throw InputError("bad field");
        if (i == 5) throw Failure("broke");
        return std::to_string(i * i);
      },
      [&](std::size_t i, bool ok, const std::string& text) { seen[i] += (ok ? "+" : "-") + text; },
      [] { return false; });
  CHECK(finished == 6);
  CHECK(seen == std::vector<std::string>{"+0", "+1", "+4", "+9", "-input error: bad field", "-failed: broke"});
}

TEST_CASE("common::run_process_pool: stop() ends the pool and drops the running tasks", "[common]") {
  int calls = 0;
  std::size_t reported = 0;
  const std::size_t finished = run_process_pool(
      4, 2,
      [](std::size_t) -> std::string {
        ::pause();  // never finishes on its own
        return "";
      },
      [&](std::size_t, bool, const std::string&) { ++reported; }, [&] { return ++calls > 2; });
  CHECK(finished == 0);
  CHECK(reported == 0);
}
